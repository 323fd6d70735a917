//! The transformers parity tests again at every SIMD level this CPU runs below its best, and on
//! Candle's engine. `ROFORMER_CPU_LEVEL` and `ROFORMER_ENGINE` are read once per process, so each
//! setting runs the tests in a child process of this test binary.

use crate::support::{fixture, not_run_here};

/// The crate's detection against what Linux reports in /proc/cpuinfo, which lists AMX's flags
/// only where the kernel enabled the tile state: a CPU that shows them must get the `amx` level
/// (the process's permission is the one thing /proc/cpuinfo cannot tell, and Linux grants it on
/// request since 5.16, the first kernel with AMX).
#[test]
fn the_detected_levels_agree_with_proc_cpuinfo() {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        not_run_here("the levels' detection against /proc/cpuinfo (there is none)");
        return;
    };
    let flags: Vec<&str> =
        info.lines().find(|l| l.starts_with("flags")).map_or(vec![], |l| l.split_whitespace().collect());
    let has = |f: &str| flags.contains(&f);
    let levels = roformer::kernel_probe::levels();
    let runs = |level: &str| levels.contains(&level);
    if cfg!(target_arch = "x86_64") {
        let avx512 = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"].into_iter().all(has);
        let bf16 = avx512 && has("avx512_vnni") && has("avx512_bf16");
        let amx = bf16 && ["amx_tile", "amx_int8", "amx_bf16"].into_iter().all(has);
        assert_eq!(runs("avx512"), avx512, "avx512 against /proc/cpuinfo");
        assert_eq!(runs("avx512-bf16"), bf16, "avx512-bf16 against /proc/cpuinfo");
        assert_eq!(runs("amx"), amx, "amx against /proc/cpuinfo");
        println!("levels {levels:?} agree with /proc/cpuinfo (amx: {amx})");
    }
}

/// Runs the tests whose names start with `filters` in a child with `env` set; returns how many passed.
fn run_tests(env: (&str, &str), filters: &[&str]) -> usize {
    let exe = std::env::current_exe().unwrap();
    let out = crate::support::program(exe)
        .args(filters)
        .args(["--test-threads", "2"])
        .env(env.0, env.1)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}={}: tests failed\n{stdout}\n{}",
        env.0,
        env.1,
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(passed > 0, "{}={}: no test ran\n{stdout}", env.0, env.1);
    passed
}

/// Everything checked against transformers' outputs, and int8 against f32.
const PARITY: [&str; 4] = ["model_parity::", "families::", "pipelines::", "quantization::"];

#[test]
fn parity_at_every_level_this_cpu_runs() {
    let levels = roformer::kernel_probe::arch_levels();
    let best = levels.iter().rev().find(|l| l.1).map(|l| l.0).unwrap_or("portable");
    for (level, supported) in levels {
        if !supported {
            not_run_here(format!("the parity tests at level {level} (this CPU cannot run it)"));
        } else if level == best {
            println!("level {level}: this CPU's best, which the rest of this test binary runs at");
        } else {
            let passed = run_tests(("ROFORMER_CPU_LEVEL", level), &PARITY);
            println!("level {level}: {passed} parity tests passed");
        }
    }
}

#[test]
fn parity_on_candles_engine() {
    // int8 belongs to the fused engine: Candle's refuses it (tested below), so its tests stay out.
    let passed = run_tests(("ROFORMER_ENGINE", "candle"), &PARITY[..3]);
    println!("Candle's engine: {passed} parity tests passed");
}

#[test]
fn engine_settings_that_cannot_be_served_are_named() {
    let model = fixture("pipelines/cls").to_string_lossy().into_owned();
    let cases = [
        (
            "ROFORMER_CPU_LEVEL",
            "avx9",
            "ROFORMER_CPU_LEVEL=avx9: not a level (choices: portable, simd128, relaxed-simd, neon, neon-dotprod, neon-i8mm, avx2",
        ),
        ("ROFORMER_ENGINE", "gpu", "ROFORMER_ENGINE=gpu: not an engine (choices: fused, candle)"),
    ];
    for (var, value, message) in cases {
        let out = crate::support::program(crate::examples::example("classify"))
            .args(["--model", &model, "--input", "/dev/null"])
            .env(var, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(message), "{var}={value}: {stderr}");
    }
    // Candle's engine runs f32 on the CPU too, but int8 is the fused engine's alone.
    let out = crate::support::program(crate::examples::example("classify"))
        .args(["--model", &model, "--quantize", "int8", "--input", "/dev/null"])
        .env("ROFORMER_ENGINE", "candle")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("ROFORMER_ENGINE=candle chose Candle's"), "{stderr}");
}
