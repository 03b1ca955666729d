"""``python -m kubesim``: serve kubesim until interrupted.

Layer: kubesim command line; calls :func:`kubesim.run_forever`.
"""

from __future__ import annotations

import argparse

from kubesim import run_forever


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kubesim", description="Kubernetes API emulator over HTTP")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port (0 picks a free one)")
    parser.add_argument("--kubeconfig-out", default=None, help="write a kubeconfig here")
    parser.add_argument("--no-kubelet", action="store_true", help="do not run the fake kubelet")
    args = parser.parse_args(argv)
    run_forever(args.host, args.port, args.kubeconfig_out, kubelet=not args.no_kubelet)


if __name__ == "__main__":
    main()
