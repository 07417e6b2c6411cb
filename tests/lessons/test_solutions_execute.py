"""Every reference notebook (each edition's) runs top to bottom in a real kernel, and its
hidden-test cells (grader.kernel.grade, as nbgrader runs them) give full points."""

from __future__ import annotations

import nbformat
import pytest
from support import executed_solution, lessons

from coursekit import catalogue

pytestmark = pytest.mark.slow  # over ~30 s on 2 cores: out of the quick loop (-m "not slow")

EDITIONS = [(lesson, edition) for lesson in lessons() for edition in catalogue.get(lesson).editions]


@pytest.mark.parametrize(("lesson", "edition"), EDITIONS, ids=[f"{x}-{e}" for x, e in EDITIONS])
def test_solution_notebook_runs_and_scores_full_marks_in_kernel(lesson: str, edition: str,
                                                                 tmp_path_factory) -> None:
    nb = nbformat.read(executed_solution(tmp_path_factory, lesson, edition), as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"cell {index} raised {errors[0].ename}: {errors[0].evalue}"
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            stderr = [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
            assert not stderr, f"test cell {meta['grade_id']} wrote to stderr: {stderr[0].text[:300]}"
            results = [o for o in cell.outputs if o.output_type == "execute_result"]
            assert results, f"test cell {meta['grade_id']} returned no points"
            assert float(results[-1].data["text/plain"]) == meta["points"], (
                f"{meta['grade_id']}: in-kernel grading gave {results[-1].data['text/plain']} "
                f"of {meta['points']}")
