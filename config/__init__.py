"""Stack configuration: one pydantic tree, validated before any resource exists; it never creates one.

One package per component of the design card holds that component's settings
(`gpu_host`, `kai_scheduler`, `queue_hierarchy`, `vcluster_tenant`, `observability`);
`versions` pins every component. `stack` is the root of the tree, `sources` reads it
from a running program or a stack file, and `pulumi_stack` is the only reader of
`pulumi.Config`. The rest is shared: error messages (`issues`), constrained types
(`types`, `quantities`), name limits (`names`), platform-owned Helm values
(`owned_values`), and the facts about upstream software the program relies on,
each with its source (`upstream`).
"""
