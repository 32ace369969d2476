"""Variable processing order for dual filtering (paper §III-B; reference notes §4.3).

1. weight = candidate count; head and tail weights are halved (their Eq. 1 intervals have
   length w, a middle variable's 2w);
2. the first variable has the minimum weight;
3. then the variables without dependent links to others, in ascending weight;
4. then, greedily, the variable maximising (1 + 3·#equalities with visited ones) / count.

Dependent links are looked up by variable name (the reference code's substring test on "X-Y"
keys confused multi-character names).
"""

from __future__ import annotations

from dfs_cer.query.analyze import Analysis, Role


def variable_order(analysis: Analysis, counts: dict[str, int]) -> list[str]:
    """Order of the filterable variables (head, tail, middle) for the round trips."""
    names = [v.name for v in analysis.filter_variables]
    if not names:
        return []

    def weight(name: str) -> float:
        role = analysis.variable(name).role
        c = counts.get(name, 0)
        return c / 2 if role in (Role.HEAD, Role.TAIL) else c

    linked: dict[str, set[str]] = {n: set() for n in names}
    for v in analysis.variables:
        for e in v.equalities:
            for a, b in ((e.left_variable, e.right_variable), (e.right_variable, e.left_variable)):
                if a in linked:
                    linked[a].add(b)
        for r in v.residuals:
            from dfs_cer.query.expr import Column, walk

            refs = {n.variable or v.name for n in walk(r) if isinstance(n, Column)}
            for a in refs:
                if a in linked:
                    linked[a] |= refs - {a}
    order = [min(names, key=lambda n: (weight(n), names.index(n)))]
    rest = [n for n in names if n not in order]
    order += sorted((n for n in rest if not linked[n]), key=lambda n: (weight(n), names.index(n)))
    rest = [n for n in rest if n not in order]
    while rest:
        visited = set(order)

        def score(n: str, visited: set[str] = visited) -> float:
            eq = sum(
                1
                for e in analysis.equalities
                if n in (e.left_variable, e.right_variable) and e.other(n) in visited
            )
            return (1 + 3 * eq) / max(1, counts.get(n, 0))

        best = max(rest, key=lambda n: (score(n), -names.index(n)))
        order.append(best)
        rest.remove(best)
    return order
