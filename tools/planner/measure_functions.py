"""measure.py's functions without its measurements, so that every other planner script measures
with exactly the same code (make_model, logprobs_of, gen_fn, train_fn, grpo_fn, measure, run)."""
import ast
import os


def load(out_dir=None):
    """A namespace holding measure.py's functions; `run` appends rows to namespace["rows"] and
    saves them under out_dir as measure.py does."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measure.py")
    tree = ast.parse(open(path).read())
    tree.body = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom))]
    namespace = {"rows": [], "OUT": out_dir}
    exec(compile(tree, path, "exec"), namespace)
    return namespace
