"""The lab's images: which tag of an image a pod names, and that every program an image holds is one the lab
builds, at every tag it claims."""

import pytest

from harness.lab.build import COMPONENTS, VCLUSTER_VERSIONS, pinned_versions, vcluster_module
from harness.lab.images import IMAGES, Image, tag
from harness.tools import CHART_SOURCES


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("ghcr.io/loft-sh/vcluster-oss:0.36.1", "0.36.1"),
        ("ghcr.io/loft-sh/vcluster-oss:0.35.1@sha256:" + "0" * 64, "0.35.1"),
        ("ghcr.io/loft-sh/vcluster-oss", "latest"),
        ("localhost:5000/vcluster-oss", "latest"),
        ("localhost:5000/vcluster-oss:v1", "v1"),
        ("python", "latest"),
    ],
)
def test_the_tag_is_read_as_the_kubelet_reads_it(reference: str, expected: str) -> None:
    assert tag(reference) == expected


@pytest.mark.parametrize("image", IMAGES, ids=[i.repository for i in IMAGES])
def test_every_program_an_image_holds_is_built_by_the_lab_at_each_of_its_tags(image: Image) -> None:
    built = {c.binary for c in COMPONENTS}
    for source in image.files.values():
        if source.startswith("lab:"):
            for each in image.tags or ("any",):
                assert source.removeprefix("lab:").format(tag=each) in built, (image, each)


@pytest.mark.parametrize("version", VCLUSTER_VERSIONS)
def test_each_vcluster_release_the_lab_builds_has_its_lock_file_and_its_chart(version: str) -> None:
    assert pinned_versions(vcluster_module(version))["github.com/loft-sh/vcluster"] == f"v{version}"
    assert f"vcluster-{version}.tgz" in CHART_SOURCES, "a tenant is moved to a release through its chart"
