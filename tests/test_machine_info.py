"""The CPU identity every figure and per-machine choice uses (cuvil_perception.machine_info)."""

from cuvil_perception.machine_info import cpu, parse_cpuinfo

ZEN3 = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse4_2 avx avx2 fma bmi2
"""
ZEN4 = """model name\t: AMD EPYC 9B14
flags\t\t: sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16
"""
SAPPHIRE = """model name\t: Intel(R) Xeon(R) Platinum 8481C
flags\t\t: avx2 fma avx512f avx512_vnni amx_int8 amx_bf16
"""
ALDER = "model name\t: 12th Gen Intel(R) Core(TM) i7-1260P\nflags\t\t: avx2 fma avx_vnni\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes asimddp sve i8mm\nCPU part\t: 0xd40\n"


def test_isa_labels_and_int8_saturation_per_cpu():
    zen3 = parse_cpuinfo(ZEN3, "x86_64", 2)
    assert (zen3.model, zen3.isa, zen3.int8_saturates) == ("AMD EPYC 7B13", "AVX2+FMA", True)
    zen4 = parse_cpuinfo(ZEN4, "x86_64", 2)
    assert (zen4.isa, zen4.int8_saturates) == ("AVX-512 VNNI", False)
    assert parse_cpuinfo(SAPPHIRE, "x86_64", 2).isa == "AVX-512 VNNI AMX"
    alder = parse_cpuinfo(ALDER, "x86_64", 2)
    assert (alder.isa, alder.int8_saturates) == ("AVX2+FMA AVX-VNNI", False)
    arm = parse_cpuinfo(GRAVITON, "aarch64", 4)
    assert (arm.isa, arm.int8_saturates) == ("aarch64 NEON dotprod", False)
    assert "sve" in arm.features and "neon" in arm.features


def test_fingerprint_tells_cpus_apart_and_is_stable():
    zen3, zen4 = parse_cpuinfo(ZEN3, "x86_64", 2), parse_cpuinfo(ZEN4, "x86_64", 2)
    assert zen3.fingerprint != zen4.fingerprint
    assert zen3.fingerprint == parse_cpuinfo(ZEN3, "x86_64", 2).fingerprint
    assert zen3.fingerprint != parse_cpuinfo(ZEN3, "x86_64", 4).fingerprint
    assert len(zen3.fingerprint) == 16


def test_host_is_described():
    host = cpu()
    assert host.model and host.arch and host.cores >= 1
    assert host.isa in host.describe() and host.model in host.describe()
