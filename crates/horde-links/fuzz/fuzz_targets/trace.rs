//! Fuzz the Mahimahi trace parser: arbitrary bytes must give a trace or an error that
//! names the file, never a panic.
//!
//! Run with `cargo fuzz run trace` from `crates/horde-links`.

#![no_main]

use horde_links::Trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = Trace::parse_bytes("fuzz.trace", data);
    match &parsed {
        Ok(trace) => {
            let ms = trace.opportunities_ms();
            assert!(!ms.is_empty());
            assert!(ms.windows(2).all(|w| w[0] <= w[1]));
            assert_eq!(trace.period_ms(), *ms.last().unwrap());
            assert!(trace.period_ms() > 0);
            assert!(trace.capacity_bps() > 0.0);
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.trace:")),
    }
    // Text input parses the same way as its bytes.
    if let Ok(text) = std::str::from_utf8(data) {
        let from_text = Trace::parse("fuzz.trace", text);
        assert_eq!(
            from_text.as_ref().ok(),
            parsed.as_ref().ok(),
            "str and bytes parsers disagree"
        );
    }
});
