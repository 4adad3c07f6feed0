"""The site ``search.evolve`` evolves programs for: its checks, and the genes its inputs make::

    from numptx.search.sites import site_genes
    name, site, genes = site_genes(tmpl, "f", "cand", ["add", "mul"], None)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..jit.targets import SiteTarget, Target, missing_members
from .genes import Genes, SearchError

__all__ = ["site_genes"]


def site_genes(template: SiteTarget, site: Any, select: str, ops: Sequence[str],
                constants: Sequence[float] | None) -> tuple[str, Any, Genes]:
    """(site name, site, genes) of ``evolve``'s site: its float inputs (less ``select``)
    are the genes' inputs; a template (a :class:`~numptx.jit.targets.SiteTarget`) or site
    that cannot host the programs is a SearchError naming it."""
    if not missing_members(template, Target) and template.per_signature:
        raise SearchError(f"evolve: template={template!r} is an nx.kernel, whose sites' types "
                          f"follow its arguments: give its template for them, "
                          f"k.template(*args)")
    lacking = missing_members(template, SiteTarget)
    sites = None if lacking else template.sites
    if not isinstance(sites, Mapping):
        what = ("has no sites" if not lacking or "sites" in lacking else
                "is not a template with sites")
        why = f"; it lacks {', '.join(lacking)}" if lacking else ""
        raise SearchError(f"evolve: template={template!r} {what} (give an nx.CudaTemplate or a "
                          f"kernel's template with injection sites{why})")
    name = site if isinstance(site, str) else getattr(site, "name", None)
    if not isinstance(name, str) or name not in sites:
        raise SearchError(f"evolve: site={site!r}: the template's sites are "
                          f"{', '.join(sites) or 'none'}")
    s = sites[name]
    ins = [v for v in s.inputs if v.name != select]
    if select not in [v.name for v in s.inputs]:
        raise SearchError(f"evolve: select={select!r}: site {name!r} has no such input (it picks "
                          f"the candidate in a packed module; give PTX_IN(U32, {select}))")
    types = {v.dtype for v in ins}
    if not ins or len(types) != 1 or not types <= {"f32", "f64"}:
        raise SearchError(f"evolve: site {name!r}: programs need at least one input and inputs "
                          f"of one float type (f32 or f64), got "
                          f"{', '.join(f'{v.name}: {v.dtype}' for v in ins) or 'none'}")
    genes = Genes(ops, names=[v.name for v in ins], dtype=types.pop(),
                  **({} if constants is None else {"constants": constants}))
    genes.check_site(s, "evolve")          # one output, of the inputs' type
    return name, s, genes
