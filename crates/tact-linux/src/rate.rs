//! Link rates in tc's units, as `tact tune --bottleneck net:IF@RATE` and `tact run --idle net
//! --net-rate RATE` take them and as tact prints them.

/// A link rate in tc's units (`bit`, `kbit`, `mbit`, `gbit`, `tbit`: powers of 1000, bits per
/// second), e.g. `50mbit`, `1.5gbit`; a bare number is bits per second.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        _ => {
            return Err(format!(
                "the rate {s:?} is not a number with bit, kbit, mbit or gbit (e.g. 50mbit)"
            ))
        }
    };
    let bits = num.parse::<f64>().map_err(|_| {
        format!("the rate {s:?} is not a number with bit, kbit, mbit or gbit (e.g. 50mbit)")
    })? * scale;
    if !(1.0..=1e13).contains(&bits) {
        return Err(format!("the rate {s:?} is out of range (1bit to 10tbit)"));
    }
    Ok(bits.round() as u64)
}

/// Bits per second in tc's units, as short as exact: `50mbit`, `1.5gbit`, `1234bit`.
pub fn fmt_rate(bits: u64) -> String {
    [
        (1_000_000_000_000, "tbit"),
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ]
    .into_iter()
    .find(|&(unit, _)| bits >= unit && (bits * 1000).is_multiple_of(unit))
    .map(|(unit, name)| {
        let v = format!("{:.3}", bits as f64 / unit as f64);
        format!("{}{name}", v.trim_end_matches('0').trim_end_matches('.'))
    })
    .unwrap_or_else(|| format!("{bits}bit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_tcs_units() {
        assert_eq!(parse_rate("95mbit"), Ok(95_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("800kbit"), Ok(800_000));
        assert_eq!(parse_rate("2tbit"), Ok(2_000_000_000_000));
        assert_eq!(parse_rate("12000"), Ok(12_000));
        assert!(parse_rate("10mbps").unwrap_err().contains("kbit"));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0bit").unwrap_err().contains("range"));
        assert!(parse_rate("-5mbit").is_err());
    }

    #[test]
    fn rates_print_as_short_as_exact_and_parse_back() {
        assert_eq!(fmt_rate(95_000_000), "95mbit");
        assert_eq!(fmt_rate(8_000), "8kbit");
        assert_eq!(fmt_rate(9_500_000_000), "9.5gbit");
        assert_eq!(fmt_rate(500), "500bit");
        assert_eq!(fmt_rate(1_234), "1.234kbit");
        for r in [1, 999, 8_000, 1_500_000_000, 95_000_000, 123_456_789] {
            assert_eq!(parse_rate(&fmt_rate(r)), Ok(r));
        }
    }
}
