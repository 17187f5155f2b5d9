"""``python -m benchmarks [--quick]``: the benchmark, or (``--serve-child``) a server it starts."""

import argparse
import sys

from . import add_arguments, config_from_args, run
from .servers import serve_child

if sys.argv[1:2] == ["--serve-child"]:
    serve_child(sys.argv[2:])
else:
    cli = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    add_arguments(cli)
    try:
        config = config_from_args(cli.parse_args())
    except ValueError as exc:
        cli.error(str(exc))
    sys.exit(run(config))
