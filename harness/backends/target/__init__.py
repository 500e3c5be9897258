"""Targets: the session's own protocol run on a real board over SSH (TARGET=ssh://user@host[:port]).

harness.core.targets parses TARGET; transport keeps one multiplexed OpenSSH connection per board; board is the host's
view of one board, whose commands are harness.measure.board_side's (the standard library only, sent as source); agent
runs on the board and runs each run there through the local backend; backend is the Backend the session drives (one
board or a farm); setup checks, installs and removes the board's environment. A board's runs become a device in
harness.analysis.boards.
"""
