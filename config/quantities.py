"""Kubernetes resource quantities (`500m`, `4Gi`, `10`), read exactly so quotas can be compared offline."""

import math
import re
from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

from config.types import require_str

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
}
# The suffixes of kubernetes/apimachinery pkg/api/resource/quantity.go @v0.36.0 that a quota uses
# (exponent forms such as 1e3 are left out: nobody writes a quota that way).
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


def quantity(text: str) -> Decimal:
    """The exact value of a quantity, e.g. `500m` -> 0.5, `4Gi` -> 4294967296."""
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return Decimal(match.group(1)) * _SUFFIXES[match.group(2) or ""]


def format_quantity(resource: str, amount: Decimal) -> str:
    """`amount` of a resource as a quantity, rounded up: bytes as Mi, CPUs as millicores, counts as counts."""
    if resource.endswith(("memory", "storage")):
        return f"{math.ceil(amount / 2**20)}Mi"
    if resource.endswith("cpu"):
        return f"{math.ceil(amount * 1000)}m"
    return str(math.ceil(amount))


def _valid(value: str) -> str:
    if not _QUANTITY.match(value):
        raise PydanticCustomError(
            "quantity",
            "is not a Kubernetes quantity: use e.g. 500m, 2, 4Gi or 100",
            {},
        )
    return value


def _as_text(value: object) -> object:
    """A bare YAML number is a count (`20`), so it is accepted and kept as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return require_str(value)


Quantity = Annotated[str, BeforeValidator(_as_text), AfterValidator(_valid)]
