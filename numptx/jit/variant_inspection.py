"""``v.resources`` and ``v.sass()`` on CUDA C++ and PTX variants (:class:`~numptx.jit.template.Variant`).

They are :class:`~numptx.jit.resources.CubinInspection`'s, which :class:`~numptx.jit.kernel.KernelVariant`
and :class:`~numptx.jit.pack.Pack` inherit. ``Variant`` gets the same two attributes here, when
``numptx`` is imported (its ``__init__`` imports this module), so that ``template.py`` need not
change; listing ``CubinInspection`` among ``Variant``'s bases would make this module unnecessary.

>>> v = tmpl.inject(combine="add.f32 %v_z, %v_x, %v_y;")        # doctest: +SKIP
>>> v.resources.registers, v.resources.local_bytes
(12, 0)
"""
from __future__ import annotations

from .resources import CubinInspection
from .template import Variant

__all__ = ["Variant"]

for _name in ("resources", "sass"):
    if _name not in Variant.__dict__:
        setattr(Variant, _name, CubinInspection.__dict__[_name])
