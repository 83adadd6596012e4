"""`python3 -m modelserver [--script FILE|-] [--host H] [--port N]`: serve one
script (read from FILE, or from stdin when FILE is `-` or omitted) until killed."""

from __future__ import annotations

import argparse
import json
import sys

from modelserver.server import READY, make_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m modelserver", description=__doc__)
    parser.add_argument("--script", default="-", help="script JSON file, or - for stdin (default)")
    parser.add_argument("--host", default="127.0.0.1", help="use 0.0.0.0 inside a container")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    args = parser.parse_args(argv)
    try:
        if args.script == "-":
            script = json.load(sys.stdin)
        else:
            with open(args.script, encoding="utf-8") as handle:
                script = json.load(handle)
        httpd = make_server(script, args.host, args.port)
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or a ScriptError
        where = "stdin" if args.script == "-" else args.script
        print(f"docdelta-modelserver: cannot serve the script from {where}: {exc}", file=sys.stderr)
        return 2
    host, port = httpd.server_address[:2]
    print(f"{READY} http://{host!s}:{port}", file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
