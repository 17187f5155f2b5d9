"""``python -m chatlab.bench``: the benchmark, or (``--serve-child``) a ceiling or limit process it starts."""

import argparse
import sys

from . import add_arguments, config_from_args, run
from .servers import serve_child

if sys.argv[1:2] == ["--serve-child"]:
    serve_child(sys.argv[2:])
else:
    cli = argparse.ArgumentParser(prog="python -m chatlab.bench")
    add_arguments(cli)
    sys.exit(run(config_from_args(cli.parse_args())))
