"""One module per `harness` subcommand, each exposing `register(subparsers)`."""
