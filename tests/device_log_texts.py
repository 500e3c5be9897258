"""Device tools' outputs, written as the tools write them, for the import tests. Each function names the source
file whose output statements it follows; the numbers are the test's own."""

from __future__ import annotations


def by_type_table(rows: list[tuple[str, int, float]], type_width: int = 40) -> str:
    """StatsCalculator::GetStatsByNodeType (tensorflow/core/util/stats_calculator.cc, tsl/util/stats_calculator.cc):
    each field is "\\t" + right-aligned to its width, fixed with 3 decimals; `[avg %]` and `[cdf %]` of the ms."""
    total = sum(ms for _, _, ms in rows)
    lines = ["============================== Summary by node type ==============================",
             f"\t{'[Node type]':>{type_width}}\t{'[count]':>9}\t{'[avg ms]':>10}\t{'[avg %]':>11}\t{'[cdf %]':>11}"
             f"\t{'[mem KB]':>10}\t{'[times called]':>10}"]
    cdf = 0.0
    for node_type, count, ms in sorted(rows, key=lambda row: -row[2]):
        share = 100.0 * ms / total
        cdf += share
        lines.append(f"\t{node_type:>{type_width}}\t{count:>9}\t{ms:>10.3f}\t{share:>10.3f}%\t{cdf:>10.3f}%"
                     f"\t{0.0:>10.3f}\t{count:>9}")
    return "\n".join(lines) + "\n\n"


def benchmark_model_log(graph: str, inference_us: float, threads: int = 4, init_us: int = 3862,
                        footprint_mb: float = 4.02734, peak_mb: float | None = 9.42188, size_mb: float = 0.492592,
                        ops: list[tuple[str, int, float]] | None = None) -> str:
    """A LiteRT benchmark_model run (tensorflow/lite/tools/benchmark/benchmark_model.cc: LogParams, Run,
    BenchmarkLoggingListener::OnBenchmarkEnd; benchmark_tflite_model.cc: LogParams; profiling_listener.cc), with
    --report_peak_memory_footprint when peak_mb is given and --enable_op_profiling when ops are."""
    text = (
        "INFO: STARTING!\n"
        "INFO: Log parameter values verbosely: [0]\n"
        f"INFO: Num threads: [{threads}]\n"
        f"INFO: Graph: [{graph}]\n"
        + ("INFO: Enable op profiling: [1]\n" if ops else "")
        + f"INFO: #threads used for CPU inference: [{threads}]\n"
        f"INFO: Loaded model {graph}\n"
        f"INFO: The input model file size (MB): {size_mb}\n"
        f"INFO: Initialized session in {init_us / 1000}ms.\n"
        "INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 "
        "seconds.\n"
        "INFO: count=361 first=2155 curr=1337 min=1296 max=2155 avg=1383.17 std=81\n\n"
        "INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 "
        "seconds.\n"
        f"INFO: count=729 first=1366 curr=1368 min=1293 max=1779 avg={inference_us} std=40\n\n"
        f"INFO: Inference timings in us: Init: {init_us}, First inference: 2155, Warmup (avg): 1383.17, "
        f"Inference (avg): {inference_us}\n"
        "INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the "
        "actual memory footprint of the model at runtime. Take the information at your discretion.\n"
        f"INFO: Memory footprint delta from the start of the tool (MB): init=2.85938 overall={footprint_mb}\n"
    )
    if peak_mb is not None:
        text += (f"INFO: Overall peak memory footprint (MB) via periodic monitoring: {peak_mb}\n"
                 "INFO: Memory status at the end of exeution:\n"
                 "INFO: - VmRSS              : 9 MB\n"
                 "INFO: + RssAnnon           : 3 MB\n"
                 "INFO: + RssFile + RssShmem : 6 MB\n")
    if ops:
        text += ("INFO: Profiling Info for Benchmark Initialization:\n"
                 "Number of nodes executed: 2\n"
                 + by_type_table([("ModifyGraphWithDelegate", 1, 3.148), ("AllocateTensors", 1, 0.714)])
                 + f"Timings (microseconds): count=1 curr={init_us}\nMemory (bytes): count=0\n2 nodes observed\n\n\n\n"
                 "INFO: Operator-wise Profiling Info for Regular Benchmark Runs:\n"
                 f"Number of nodes executed: {sum(count for _, count, _ in ops)}\n"
                 + by_type_table(ops)
                 + "Timings (microseconds): count=729 first=1368 curr=1357 min=1290 max=1776 avg=1340.8 std=40\n"
                 "Memory (bytes): count=0\n"
                 f"{sum(count for _, count, _ in ops)} nodes observed\n\n")
    return text


OLD_BENCHMARK_MODEL_LOG = (
    # The tool's README (tensorflow/lite/tools/benchmark/README.md, "Profiling model operators") and the older
    # OnBenchmarkEnd, which named the footprint line `Peak memory footprint (MB): init=... overall=...`.
    "STARTING!\n"
    "Num runs: [50]\n"
    "Graph: [/data/local/tmp/mobilenet_quant_v1_224.tflite]\n"
    "Loaded model /data/local/tmp/mobilenet_quant_v1_224.tflite\n"
    "resolved reporter\n"
    "Initialized session in 38.467ms\n"
    "Running benchmark for at least 50 iterations and at least 1 seconds\n"
    "count=50 first=79449 curr=81350 min=77385 max=88213 avg=79732 std=1929\n\n"
    "============================== Summary by node type ==============================\n"
    "\t             [Node type]\t  [count]\t  [avg ms]\t    [avg %]\t    [cdf %]\t  [mem KB]\t[times called]\n"
    "\t                 CONV_2D\t       15\t     1.406\t    89.270%\t    89.270%\t     0.000\t        0\n"
    "\t       DEPTHWISE_CONV_2D\t       13\t     0.169\t    10.730%\t   100.000%\t     0.000\t        0\n\n"
    "Timings (microseconds): count=50 first=79449 curr=81350 min=77385 max=88213 avg=79732 std=1929\n"
    "Memory (bytes): count=0\n"
    "31 nodes observed\n\n\n"
    "Average inference timings in us: Warmup: 83235, Init: 38467, Inference: 79760.9\n"
    "Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual "
    "memory footprint of the model at runtime. Take the information at your discretion.\n"
    "Peak memory footprint (MB): init=3.5 overall=21.25\n"
)


def ort_perf_test_log(average_ms: float, p50_s: float, peak_bytes: int, session_s: float = 0.0418) -> str:
    """onnxruntime_perf_test -s (onnxruntime/test/perftest/performance_runner.cc: PerformanceRunner::Run and
    PerformanceResult::DumpToFile without a result file)."""
    return (
        f"Session creation time cost: {session_s} s\n"
        "First inference time cost: 12 ms\n"
        f"Total inference time cost: {average_ms:.4f} s\n"  # 1000 requests

        "Total inference requests: 1000\n"
        f"Average inference time cost: {average_ms} ms\n"
        "Total inference run time: 5.13 s\n"
        "Number of inferences per second: 194.9 \n"
        "Avg CPU usage: 98 %\n"
        f"Peak working set size: {peak_bytes} bytes\n"
        "Avg CPU usage:98\n"
        f"Peak working set size:{peak_bytes}\n"
        "Runs:1000\n"
        "Min Latency: 0.0049 s\n"
        "Max Latency: 0.0071 s\n"
        f"P50 Latency: {p50_s} s\n"
        "P90 Latency: 0.0053 s\n"
        "P95 Latency: 0.0055 s\n"
        "P99 Latency: 0.0062 s\n"
        "P999 Latency: 0.0071 s\n"
    )


OLD_ORT_PERF_TEST_LOG = (
    # The tool's README (onnxruntime/test/perftest/README.md, "Sample output").
    "Total time cost:58.8053\n"
    "Total iterations:1000\n"
    "Average time cost:58.8053 ms\n"
    "Total run time:58.8102 s\n"
    "Min Latency is 0.0559777sec\n"
    "Max Latency is 0.0623472sec\n"
    "P50 Latency is 0.0587108sec\n"
    "P90 Latency is 0.0599845sec\n"
    "P95 Latency is 0.0605676sec\n"
    "P99 Latency is 0.0619517sec\n"
    "P999 Latency is 0.0623472sec\n"
)


def _running_average(values: list[int]) -> list[int]:
    """tegrastats' `/average`: the mean since it started, in whole mW."""
    return [round(sum(values[:i + 1]) / (i + 1)) for i in range(len(values))]


def tegrastats_log(used_mb: list[int], timestamps: bool = False, input_mw: list[int] | None = None,
                   board: str = "nano") -> str:
    """One tegrastats line per interval, as NVIDIA's documentation shows them: the Nano's (L4T 32) with bare mW
    rails `POM_5V_IN 2163/2163`, or the Orin Nano's (L4T 35) with `VDD_IN 5012mW/4980mW`, `VDD_CPU_GPU_CV`,
    `VDD_SOC`. Newer releases put `MM-DD-YYYY HH:MM:SS` first. Each line's input rail is `input_mw`'s value (the
    CPU and GPU, or CPU_GPU_CV and SOC, rails a fixed share of it)."""
    inputs = input_mw or [2163] * len(used_mb)
    averages = _running_average(inputs)
    lines = []
    for second, (used, p_in, p_avg) in enumerate(zip(used_mb, inputs, averages, strict=True)):
        stamp = f"04-18-2023 10:23:{second:02d} " if timestamps else ""
        if board == "nano":
            cpu, gpu = p_in * 19 // 100, p_in // 10
            lines.append(f"{stamp}RAM {used}/3964MB (lfb 29x4MB) SWAP 0/1982MB (cached 0MB) IRAM 0/252kB(lfb 252kB) "
                         "CPU [6%@1479,4%@1479,1%@1479,0%@1479] EMC_FREQ 0% GR3D_FREQ 0% PLL@18.5C CPU@20.5C "
                         f"PMIC@100C GPU@20C AO@27.5C thermal@20.25C POM_5V_IN {p_in}/{p_avg} POM_5V_GPU {gpu}/{gpu} "
                         f"POM_5V_CPU {cpu}/{cpu}")
        else:
            cpu_gpu_cv, soc = p_in * 13 // 100, p_in * 3 // 10
            lines.append(f"{stamp}RAM {used}/7620MB (lfb 1109x4MB) SWAP 0/3810MB (cached 0MB) "
                         "CPU [0%@729,0%@729,0%@729,0%@729,0%@729,0%@729] EMC_FREQ 0%@2133 GR3D_FREQ 0%@[305] "
                         "NVJPG0 off NVJPG1 off VIC off OFA off APE 200 cpu@47.593C soc2@46.25C soc0@47.093C "
                         f"gpu@47.187C tj@47.593C soc1@46.718C VDD_IN {p_in}mW/{p_avg}mW "
                         f"VDD_CPU_GPU_CV {cpu_gpu_cv}mW/{cpu_gpu_cv}mW VDD_SOC {soc}mW/{soc}mW")
    return "\n".join(lines) + "\n"


def jtop_csv(ram_values: list[float]) -> str:
    """jetson-stats' examples/jtop_logger.py: csv.DictWriter over `jetson.stats` (time, uptime, CPUn, RAM, ...),
    jtop 3's columns with its total power `power cur`/`power avg` in mW."""
    header = "time,uptime,CPU1,CPU2,CPU3,CPU4,RAM,SWAP,EMC,GPU,Temp CPU,Temp GPU,power cur,power avg,jetson_clocks"
    rows = [f"2023-04-18 10:23:{i:02d}.123456,1 day 2:03:{i:02d},12,8,OFF,OFF,{ram},0,3,0,31.5,30.0,2163,2100,OFF"
            for i, ram in enumerate(ram_values)]
    return "\n".join([header, *rows]) + "\n"


def jtop4_csv(total_mw: list[int], times_s: list[float], ram_fraction: float = 0.46) -> str:
    """jtop 4.2's jtop_logger.py CSV on an Orin Nano: RAM a fraction of the total, each rail `Power <RAIL>` and
    their total `Power TOT` in mW (jtop/jtop.py `stats`), the CPU_GPU_CV and SOC rails a fixed share of the total."""
    header = ("time,uptime,CPU1,CPU2,CPU3,CPU4,CPU5,CPU6,RAM,SWAP,EMC,GPU,Temp cpu,Temp gpu,Temp soc0,Temp tj,"
              "Power VDD_CPU_GPU_CV,Power VDD_SOC,Power TOT,jetson_clocks,nvp model")
    rows = []
    for total, at in zip(total_mw, times_s, strict=True):
        minute, second = divmod(at, 60)
        rows.append(f"2024-02-07 09:{int(minute):02d}:{second:09.6f},0:12:{int(second):02d},31,8,4,2,0,1,"
                    f"{ram_fraction},0.0,7,45,46.5,45.8,45.9,46.5,{total * 13 // 100},{total * 3 // 10},{total},"
                    "OFF,15W")
    return "\n".join([header, *rows]) + "\n"


def meter_csv(times_s: list[float], watts: list[float] | None = None, milliamps: list[float] | None = None,
              volts: float = 5.08) -> str:
    """A power meter's CSV log: time and power (`Time (s),Power (W)`), or current and voltage (`Time (s),Current
    (mA),Voltage (V)`), each unit in its column's name."""
    if watts is not None:
        return "Time (s),Power (W)\n" + "".join(f"{t},{w}\n" for t, w in zip(times_s, watts, strict=True))
    assert milliamps is not None
    return "Time (s),Current (mA),Voltage (V)\n" + "".join(
        f"{t},{ma},{volts}\n" for t, ma in zip(times_s, milliamps, strict=True))


def dumpsys_meminfo(pss_kb: int, rss_kb: int | None, pid: int = 5865, package: str = "org.example.bench") -> str:
    """`dumpsys meminfo <package>`: the header from ActivityManagerService, the table and App Summary from
    ActivityThread.dumpMemInfoTable (AOSP frameworks/base). With rss_kb None, the summary of Android 9 and before
    (`TOTAL:` and no RSS)."""
    table = (
        "Applications Memory Usage (in Kilobytes):\n"
        "Uptime: 219723726 Realtime: 584341125\n\n"
        f"** MEMINFO in pid {pid} [{package}] **\n"
        "                   Pss  Private  Private  SwapPss      Rss     Heap     Heap     Heap\n"
        "                 Total    Dirty    Clean    Dirty    Total     Size    Alloc     Free\n"
        "                ------   ------   ------   ------   ------   ------   ------   ------\n"
        "  Native Heap    10468    10408        0        0    12656    17408    13232     4175\n"
        "  Dalvik Heap     2130     2024        0        0     6880     4462     2231     2231\n"
        f"        TOTAL    {pss_kb}    31708     7108        0    {rss_kb or 0}    21870    15463     6406\n\n"
        " App Summary\n"
        "                       Pss(KB)                        Rss(KB)\n"
        "                        ------                         ------\n"
        "           Java Heap:     3864                          13636\n"
        "         Native Heap:    10408                          12656\n"
        "                Code:    10000                          40000\n\n"
    )
    if rss_kb is None:
        return table + f"               TOTAL:    {pss_kb}       TOTAL SWAP PSS:        0\n"
    return table + (f"           TOTAL PSS:    {pss_kb}            TOTAL RSS:    {rss_kb}       TOTAL SWAP PSS:"
                    "        0\n")
