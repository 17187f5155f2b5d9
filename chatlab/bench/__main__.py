"""``python -m chatlab.bench``: the benchmark, or (``--serve-child``) the service process it starts."""

import argparse
import sys

from . import _serve_child, add_arguments, config_from_args, run

if sys.argv[1:2] == ["--serve-child"]:
    _serve_child(sys.argv[2:])
else:
    cli = argparse.ArgumentParser(prog="python -m chatlab.bench")
    add_arguments(cli)
    sys.exit(run(config_from_args(cli.parse_args())))
