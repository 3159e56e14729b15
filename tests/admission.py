"""The API server's admission policies, evaluated offline as it would: binding, match, conditions, CEL.

For a request (operation, resource, subresource, object, its namespace), a
binding and its policy decide in this order (kubernetes/apiserver
pkg/admission/plugin/policy/{matching,validating,mutating} @v0.36.0): the
binding's matchResources (namespace and object selectors), the policy's
matchConstraints (resource rules, subresources included), then the
matchConditions, all of which must hold; then the variables and the
validations, or the mutations. CEL runs in cel-python. A MutatingAdmissionPolicy's
ApplyConfiguration builds typed objects (`Object{...}`, `Object.spec{...}`); here
those build plain maps, which are merged into the object as server-side apply
merges maps and replaces scalars.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel

Json = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """What the API server hands a policy: the request's attributes and the object's namespace."""

    object: Json
    namespace: Json
    operation: str = "CREATE"
    old_object: Json | None = None
    sub_resource: str = ""
    resource: str = "pods"
    api_group: str = ""
    api_version: str = "v1"
    user: str = "system:serviceaccount:vcluster-team-nlp:vc-team-nlp"

    def activation(self) -> dict[str, Any]:
        return {
            "object": json_to_cel(self.object),
            "oldObject": json_to_cel(self.old_object) if self.old_object is not None else None,
            "namespaceObject": json_to_cel(self.namespace),
            "request": json_to_cel(
                {
                    "operation": self.operation,
                    "subResource": self.sub_resource,
                    "resource": {"group": self.api_group, "version": self.api_version, "resource": self.resource},
                    "namespace": self.namespace["metadata"]["name"],
                    "userInfo": {"username": self.user},
                }
            ),
        }


class _TypeConstructor(celtypes.MapType):
    """`Object`, `Object.spec`, ...: calling one with field values builds a map of them."""

    def __getitem__(self, key: Any) -> "_TypeConstructor":
        return _TypeConstructor()

    def __call__(self, fields: Any) -> celtypes.MessageType:
        return celtypes.MessageType(fields or celtypes.MapType())


def _contains(container: Any, item: Any) -> celtypes.BoolType:
    """CEL's contains(): a substring for strings (cel-spec doc/langdef.md), membership otherwise.

    cel-python 0.5.0 delegates to a `contains` method that `a + b` (a plain str there) lacks.
    """
    if isinstance(container, str):
        return celtypes.BoolType(str(item) in container)
    return celtypes.BoolType(container.contains(item))


def _evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    env = celpy.Environment()
    result = env.program(env.compile(expression), functions={"contains": _contains}).evaluate(dict(activation))
    if isinstance(result, celpy.evaluation.CELEvalError):
        raise result
    return result


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        outcome = {
            "In": present and labels[key] in values,
            "NotIn": not present or labels[key] not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not outcome:
            return False
    return True


def _rule_matches(rule: Mapping[str, Any], request: Request) -> bool:
    """A resource rule; '*' matches any group, version, operation or (sub)resource name."""
    resource = f"{request.resource}/{request.sub_resource}" if request.sub_resource else request.resource

    def has(key: str, wanted: str) -> bool:
        return wanted in rule[key] or "*" in rule[key]

    return (
        has("apiGroups", request.api_group)
        and has("apiVersions", request.api_version)
        and has("operations", request.operation)
        and has("resources", resource)
    )


def _matches(resources: Mapping[str, Any] | None, request: Request) -> bool:
    if not resources:
        return True
    namespace_labels = request.namespace["metadata"].get("labels") or {}
    object_labels = (request.object.get("metadata") or {}).get("labels") or {}
    rules = resources.get("resourceRules")
    return (
        _selector_matches(resources.get("namespaceSelector"), namespace_labels)
        and _selector_matches(resources.get("objectSelector"), object_labels)
        and (rules is None or any(_rule_matches(rule, request) for rule in rules))
    )


@dataclass
class Decision:
    """None of `denials` means the policy did not apply to the request."""

    denials: list[str] | None
    variables: dict[str, Any] = field(default_factory=dict)


def _matched(policy: Mapping[str, Any], binding: Mapping[str, Any], request: Request) -> bool:
    if not _matches(binding.get("matchResources"), request) or not _matches(policy.get("matchConstraints"), request):
        return False
    activation = request.activation()
    return all(_evaluate(c["expression"], activation) for c in policy.get("matchConditions", []))


def _applies(
    policy: Mapping[str, Any], binding: Mapping[str, Any], request: Request, param: Json | None = None
) -> dict[str, Any] | None:
    """The activation when binding and policy match the request and every match condition holds."""
    if not _matched(policy, binding, request):
        return None
    activation = request.activation()
    if param is not None:
        activation["params"] = json_to_cel(param)
    variables = celtypes.MapType()
    for variable in policy.get("variables", []):
        variables[celtypes.StringType(variable["name"])] = _evaluate(
            variable["expression"], {**activation, "variables": variables}
        )
    activation["variables"] = variables
    return activation


def validate(
    policy: Mapping[str, Any],
    binding: Mapping[str, Any],
    request: Request,
    params: Sequence[Json] | None = (),
) -> list[str] | None:
    """The messages of the validations a request fails, or None when the policy does not apply.

    For a policy with a paramKind, `params` are the objects its binding's paramRef selects (in the
    request's namespace); None means the kind is not served, which refuses a matched request under
    failurePolicy Fail; none found is parameterNotFoundAction's call (apiserver
    pkg/admission/plugin/policy/generic/policy_dispatcher.go @v0.36.0).
    """
    if "paramKind" not in policy:
        return _validate_once(policy, binding, request, None)
    if not _matched(policy, binding, request):
        return None
    if params is None:
        assert policy.get("failurePolicy") == "Fail"
        return [f"{policy['paramKind']['kind']} is not served: the policy cannot find its params"]
    if not params:
        action = binding["paramRef"].get("parameterNotFoundAction", "Deny")
        return [] if action == "Allow" else ["no params found"]
    return [denial for param in params for denial in _validate_once(policy, binding, request, param) or []]


def _validate_once(
    policy: Mapping[str, Any], binding: Mapping[str, Any], request: Request, param: Json | None
) -> list[str] | None:
    activation = _applies(policy, binding, request, param)
    if activation is None:
        return None
    assert binding.get("validationActions") == ["Deny"], "a failed validation must refuse the request"
    denials = []
    for check in policy["validations"]:
        try:
            passed = bool(_evaluate(check["expression"], activation))
        except celpy.evaluation.CELEvalError as error:
            # An expression that fails to evaluate refuses the request under failurePolicy Fail.
            assert policy.get("failurePolicy") == "Fail"
            denials.append(f"evaluation error ({error}): {check['message']}")
            continue
        if not passed:
            denials.append(_message(check, activation))
    return denials


def _message(validation: Mapping[str, Any], activation: Mapping[str, Any]) -> str:
    """messageExpression when it yields a non-empty string, else message (apiserver validating/validator.go)."""
    if "messageExpression" in validation:
        try:
            text = _evaluate(validation["messageExpression"], activation)
        except celpy.evaluation.CELEvalError:
            text = ""
        if isinstance(text, str) and text.strip():
            return str(text)
    return str(validation["message"])


def _merge(target: Json, patch: Mapping[str, Any]) -> Json:
    merged = dict(target)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.IntType):
        return int(value)
    return str(value) if isinstance(value, celtypes.StringType) else value


def mutate(policy: Mapping[str, Any], binding: Mapping[str, Any], request: Request) -> Json | None:
    """The object after the policy's ApplyConfiguration mutations, or None when the policy does not apply."""
    activation = _applies(policy, binding, request)
    if activation is None:
        return None
    activation["Object"] = _TypeConstructor()
    mutated = request.object
    for mutation in policy["mutations"]:
        assert mutation["patchType"] == "ApplyConfiguration"
        mutated = _merge(mutated, _plain(_evaluate(mutation["applyConfiguration"]["expression"], activation)))
    return mutated
