"""roller: Roller's tree construction (OSDI 2022) on the same states and hardware model as gensor.

    tg.tune(wl, strategy="roller")

rTile-aligned sizes, greedy scale-up by data-reuse score from the minimal state (reg -> L1 -> L2),
scale-out across the cores, then the top k (default 8) programs by the model are measured. The
baseline Gensor's graph traversal is compared against (docs/gensor.md).
"""

from __future__ import annotations

from tilegraph.errors import TilegraphError
from tilegraph.runtime.backends import backend_for
from tilegraph.tune.gensor.policy import roller_construct
from tilegraph.tune.strategy.base import Candidate, TuneContext
from tilegraph.tune.strategy.gensor import ModelGuidedStrategy, candidates_from_states

CONSTRUCTED_PER_CANDIDATE = 2


class RollerStrategy(ModelGuidedStrategy):
    name = "roller"

    def _search(self, ctx: TuneContext) -> list[Candidate]:
        if backend_for(ctx.target).is_gpu:
            # Roller's rTile tree is planned with the CPU hardware model (registers, L1, L2, cores);
            # a GPU plan needs another tree (warps, shared memory), which this baseline does not have
            raise TilegraphError(f"strategy 'roller' plans CPU tile trees only; for a {ctx.target.kind} target use "
                                 f"'gensor' (its GPU search) or 'random'")
        setup = self._prepare(ctx)
        states = roller_construct(setup, CONSTRUCTED_PER_CANDIDATE * self.top_k)
        return candidates_from_states(setup, [*states, setup.minimal], self.top_k, self.name)


__all__ = ["RollerStrategy"]
