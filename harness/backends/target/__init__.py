"""Targets: the session's own protocol run on a real board over SSH (TARGET=ssh://user@host[:port]).

address parses TARGET; transport keeps one multiplexed OpenSSH connection per board; board_side is what runs on the
board (the standard library only: its facts, and the agent that runs each run there through the local backend);
backend is the Backend the session drives; setup installs, checks and removes the board's environment.
"""
