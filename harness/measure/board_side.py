"""What runs on the board before the harness's code is there: the standard library only, sent as `python3 -c` source.

    facts            the board's Python, CPU, cores, memory, cgroups, engines, energy readers and free disk (JSON)
    snapshot         temperatures, core frequencies and governors now (JSON)
    receive DIR      a tar stream on standard input unpacked under DIR (member names checked to stay inside it)
    clean DIR        every process that names DIR killed, then DIR removed
    sweep BASE       the session folders under BASE whose agent is gone (its lock free) cleaned
Exit 28 (ENOSPC) with one line when the board's disk is full.
"""

import contextlib
import errno
import fcntl
import json
import os
import platform
import shutil
import signal
import sys
import tarfile
import time

NO_SPACE_EXIT = 28
LOCK_NAME = ".agent.lock"
ENGINES = {"onnxruntime": "onnxruntime", "ncnn": "ncnn", "ai_edge_litert": "ai-edge-litert",
           "tflite_runtime": "tflite-runtime", "torch": "torch", "numpy": "numpy"}
SAFE_EXTRACT = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python 3.12+ asks for one
ARM_PARTS = {"0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
             "0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76",
             "0xd0c": "Neoverse-N1", "0xd0d": "Cortex-A77", "0xd41": "Cortex-A78", "0xd44": "Cortex-X1",
             "0xd46": "Cortex-A510", "0xd47": "Cortex-A710", "0xd48": "Cortex-X2", "0xd4d": "Cortex-A715",
             "0xd4e": "Cortex-X3", "0xd80": "Cortex-A520", "0xd81": "Cortex-A720", "0x004": "Carmel"}


def _read(path, default=""):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return default


def cpu_model():
    """x86's model name; on ARM the cores' names from their part numbers (big.LITTLE: each kind once)."""
    names, parts = [], []
    for line in _read("/proc/cpuinfo").splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and value not in names:
            names.append(value)
        elif key == "CPU part" and value not in parts:
            parts.append(value)
    if names:
        return " / ".join(names)
    if parts:
        return " + ".join(ARM_PARTS.get(part.lower(), f"ARM part {part}") for part in parts)
    return platform.processor() or "unknown"


def board_model():
    """The board's own name where its firmware gives one (device tree: Raspberry Pi, Jetson; DMI on x86)."""
    text = _read("/proc/device-tree/model").rstrip("\x00") or _read("/sys/class/dmi/id/product_name")
    return text or None


def memory_mib():
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024
    return None


def cgroup_state():
    """The cgroup version and whether this user can make cgroups there (where the local backend would limit runs)."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        own = _read("/proc/self/cgroup").rpartition("::")[2] or "/"
        folder = "/sys/fs/cgroup" + own.rstrip("/")
        return {"version": 2, "writable": os.access(folder, os.W_OK), "memory_peak": True}
    if os.path.isdir("/sys/fs/cgroup/memory"):
        return {"version": 1, "writable": os.access("/sys/fs/cgroup/memory", os.W_OK), "memory_peak": True}
    return {"version": 0, "writable": False, "memory_peak": False}


def engines():
    """Each engine module this Python can import: its version (None where the module is there without metadata)."""
    import importlib.util
    found = {}
    for module, distribution in ENGINES.items():
        if importlib.util.find_spec(module) is None:
            continue
        try:
            from importlib import metadata
            found[module] = metadata.version(distribution)
        except Exception:  # noqa: BLE001 - a module without metadata is still there
            found[module] = None
    return found


def energy_readers():
    """Where this board exposes energy or power: RAPL (x86), hwmon sensors, INA rails (Jetson), tegrastats."""
    found = []
    rapl = "/sys/class/powercap"
    if any(name.startswith("intel-rapl:") for name in _listdir(rapl)):
        readable = any(os.access(f"{rapl}/{name}/energy_uj", os.R_OK) for name in _listdir(rapl))
        found.append("rapl" if readable else "rapl (not readable by this user)")
    for hwmon in _listdir("/sys/class/hwmon"):
        files = _listdir(f"/sys/class/hwmon/{hwmon}")
        if any(f.startswith(("power", "energy")) and f.endswith(("_input", "_average")) for f in files):
            found.append(f"hwmon:{_read(f'/sys/class/hwmon/{hwmon}/name') or hwmon}")
    for driver in ("/sys/bus/i2c/drivers/ina3221x", "/sys/bus/i2c/drivers/ina3221"):
        if _listdir(driver):
            found.append("ina3221")
    if shutil.which("tegrastats"):
        found.append("tegrastats")
    return found


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def facts():
    uname = platform.uname()
    home = os.path.expanduser("~")
    return {
        "python": platform.python_version(), "executable": sys.executable, "machine": uname.machine,
        "system": uname.system, "release": uname.release, "kernel_version": uname.version, "hostname": uname.node,
        "libc": list(platform.libc_ver()), "cpu_model": cpu_model(), "board_model": board_model(),
        "cpu_count": os.cpu_count(), "cores": sorted(os.sched_getaffinity(0)), "memory_mib": memory_mib(),
        "cgroup": cgroup_state(), "engines": engines(), "energy": energy_readers(),
        "disk_free_mib": shutil.disk_usage(home).free / 1024**2, "home": home,
    }


def snapshot():
    """Temperatures (the hottest zone, in °C), each core's frequency (MHz) and the governors in use, now."""
    temps = []
    for zone in _listdir("/sys/class/thermal"):
        value = _read(f"/sys/class/thermal/{zone}/temp")
        if zone.startswith("thermal_zone") and value.lstrip("-").isdigit():
            temps.append(int(value) / 1000)
    freqs, governors = {}, set()
    for cpu in _listdir("/sys/devices/system/cpu"):
        folder = f"/sys/devices/system/cpu/{cpu}/cpufreq"
        value = _read(f"{folder}/scaling_cur_freq")
        if value.isdigit():
            freqs[cpu] = int(value) / 1000
            governors.add(_read(f"{folder}/scaling_governor"))
    return {"temperature_c": max(temps) if temps else None, "freq_mhz": freqs,
            "governor": ",".join(sorted(g for g in governors if g)) or None, "time": time.time()}


def receive(folder):
    """Unpack the tar stream on standard input under `folder`; a member that would land outside it is refused."""
    os.makedirs(folder, exist_ok=True)
    root = os.path.realpath(folder)
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
        for member in archive:
            target = os.path.realpath(os.path.join(root, member.name))
            if not (member.isfile() or member.isdir()) or not target.startswith(root + os.sep):
                raise SystemExit(f"refused {member.name!r}: not a plain file inside the session's folder")
            archive.extract(member, root, **SAFE_EXTRACT)


def _mentions(pid, folder):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            if folder.encode() in handle.read():
                return True
        return os.readlink(f"/proc/{pid}/cwd").startswith(folder)
    except OSError:
        return False


def clean(folder):
    """Kill every process whose command line or working folder names `folder` (the agent, runners and scripts of a
    session), then remove the folder."""
    folder = os.path.realpath(folder)
    me = os.getpid()
    for _ in range(3):
        pids = [int(p) for p in _listdir("/proc") if p.isdigit() and int(p) != me and _mentions(p, folder)]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not pids:
            break
        time.sleep(0.1)
    shutil.rmtree(folder, ignore_errors=True)


def alive(folder):
    """Whether a session folder's agent still holds its lock."""
    path = os.path.join(folder, LOCK_NAME)
    try:
        handle = open(path, "a")  # noqa: SIM115 - closed below
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        handle.close()
    return False


def sweep(base):
    """Clean the session folders under `base` that no agent holds (a host killed outright left them)."""
    removed = []
    for name in _listdir(base):
        folder = os.path.join(base, name)
        if os.path.isdir(folder) and not alive(folder):
            clean(folder)
            removed.append(name)
    return removed


def main(argv):
    command, args = argv[0], argv[1:]
    try:
        if command == "facts":
            print(json.dumps(facts()))
        elif command == "snapshot":
            print(json.dumps(snapshot()))
        elif command == "receive":
            receive(args[0])
        elif command == "clean":
            clean(args[0])
        elif command == "sweep":
            print(json.dumps(sweep(args[0])))
        else:
            raise SystemExit(f"unknown command {command!r}")
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            where = args[0] if args else os.path.expanduser("~")
            while not os.path.exists(where):
                where = os.path.dirname(where) or "."
            print(f"no space left on the board's disk ({shutil.disk_usage(where).free // 1024**2} MiB free in "
                  f"{os.path.abspath(where)})", file=sys.stderr)
            raise SystemExit(NO_SPACE_EXIT) from None
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
