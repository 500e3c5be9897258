"""`harness image`: build the Docker runtime image named by the profile's IMAGE (what `make image` runs)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.commands import COMMANDS
from harness.core.config import load_profile
from harness.core.errors import ConfigError

DEFAULT_BASE_IMAGE = "python:3.11-slim"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("image", help=COMMANDS["image"],
                                   description=__doc__)
    parser.add_argument("--env", default=os.environ.get("HARNESS_ENV_FILE") or None,
                        help="device profile env file whose IMAGE names the tag (default: $ENV)")
    parser.add_argument("--tag", help="image tag (default: IMAGE of the profile, harness-runtime:latest)")
    parser.add_argument("--base-image", default=os.environ.get("HARNESS_BASE_IMAGE") or DEFAULT_BASE_IMAGE,
                        help=f"BASE_IMAGE build arg (default: $HARNESS_BASE_IMAGE or {DEFAULT_BASE_IMAGE})")
    parser.add_argument("--torch", action="store_true", default=os.environ.get("HARNESS_IMAGE_TORCH") == "1",
                        help="add PyTorch (CPU)")
    parser.add_argument("--litert", action="store_true", default=os.environ.get("HARNESS_IMAGE_LITERT") == "1",
                        help="add LiteRT for .tflite models")
    parser.add_argument("--ncnn", action="store_true", default=os.environ.get("HARNESS_IMAGE_NCNN") == "1",
                        help="add ncnn for RUNTIME=ncnn and .param models")
    parser.add_argument("--ca-bundle", type=Path, help="CA bundle pip trusts during the build (default: $PIP_CERT)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.backends.docker_image import build_image, default_ca_bundle

    if args.ca_bundle and not args.ca_bundle.is_file():
        raise ConfigError(f"--ca-bundle {args.ca_bundle} is not a file; pass a PEM bundle such as "
                          "/etc/ssl/certs/ca-certificates.crt")
    tag = args.tag or load_profile(args.env).image
    build_args = {"WITH_TORCH": "1" if args.torch else "0", "WITH_LITERT": "1" if args.litert else "0",
                  "WITH_NCNN": "1" if args.ncnn else "0"}
    image_id = build_image(tag, args.base_image, build_args, args.ca_bundle or default_ca_bundle())
    print(f"built {tag} ({image_id}) from {args.base_image}")
    return 0
