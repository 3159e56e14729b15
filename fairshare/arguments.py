"""What the planner's commands check of their numeric arguments, and the exit code of a refusal."""

from config.issues import ConfigError

INVALID_INPUT = 2


def checked_capacity(value: float | None) -> float | None:
    if value is not None and not 0 < value < float("inf"):
        raise ConfigError([f"--capacity {value:g}: give the pool's size in GPUs, a finite number above 0"])
    return value


def checked_price(value: float | None) -> float | None:
    if value is not None and not 0 <= value < float("inf"):
        raise ConfigError([f"--price-per-gpu-hour {value:g}: give a finite price >= 0"])
    return value
