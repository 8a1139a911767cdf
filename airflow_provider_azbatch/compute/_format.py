from __future__ import annotations


def fmt_number(value: float) -> str:
    """Render 2.0 as "2" and 0.5 as "0.5" so messages echo what the user wrote."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6g}"
