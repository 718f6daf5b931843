import Foundation

/// GeoPackage DATETIME text (GeoPackage 1.3 §1.1.1.1.3): `YYYY-MM-DDTHH:MM:SS.SSSZ`, UTC.
///
/// The reader also accepts what other writers produce: a date alone, no fraction, a space
/// instead of `T`, no zone (read as UTC) and `±HH:MM` offsets (GDAL's default `WITH_TZ` form).
public enum GeoPackageDate {
    /// Formats `date` with millisecond precision in UTC (the millisecond it falls in).
    public static func format(_ date: Date) -> String {
        format(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// Formats the time `totalMillis` milliseconds after 1970-01-01T00:00:00Z, in UTC.
    public static func format(milliseconds totalMillis: Int64) -> String {
        var seconds = totalMillis.quotientAndRemainder(dividingBy: 1000)
        if seconds.remainder < 0 { seconds = (seconds.quotient - 1, seconds.remainder + 1000) }
        var days = seconds.quotient / 86_400
        if seconds.quotient - days * 86_400 < 0 { days -= 1 }
        let secondOfDay = seconds.quotient - days * 86_400
        let (y, m, d) = civil(fromDays: days)
        // Written digit by digit into the string's own storage: this runs once per date value on
        // bulk paths.
        return String(unsafeUninitializedCapacity: 24) { out in
        func put(_ value: Int64, _ at: Int, _ width: Int) {
            var v = value < 0 ? 0 : value
            for k in stride(from: at + width - 1, through: at, by: -1) {
                out[k] = UInt8(48 + v % 10)
                v /= 10
            }
        }
        put(y, 0, 4)
        out[4] = UInt8(ascii: "-")
        put(m, 5, 2)
        out[7] = UInt8(ascii: "-")
        put(d, 8, 2)
        out[10] = UInt8(ascii: "T")
        put(secondOfDay / 3600, 11, 2)
        out[13] = UInt8(ascii: ":")
        put(secondOfDay / 60 % 60, 14, 2)
        out[16] = UInt8(ascii: ":")
        put(secondOfDay % 60, 17, 2)
        out[19] = UInt8(ascii: ".")
        put(seconds.remainder, 20, 3)
        out[23] = UInt8(ascii: "Z")
        return 24
        }
    }

    /// Parses GeoPackage DATE/DATETIME text; nil when it is not one.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    /// ``parse(_:)`` of UTF-8 bytes in place (a column's text as SQLite hands it over): checksums
    /// and feature reads parse a date per row.
    public static func parse(utf8 b: UnsafeBufferPointer<UInt8>) -> Date? {
        var i = 0
        func number(_ digits: Int) -> Int64? {
            guard i + digits <= b.count else { return nil }
            var v: Int64 = 0
            for k in 0..<digits {
                let c = b[i + k]
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            i += digits
            return v
        }
        func expect(_ c: Unicode.Scalar) -> Bool {
            guard i < b.count, b[i] == UInt8(ascii: c) else { return false }
            i += 1
            return true
        }
        guard let y = number(4), expect("-"), let mo = number(2), expect("-"), let d = number(2),
            (1...12).contains(mo), (1...31).contains(d)
        else { return nil }
        var seconds = days(fromCivil: y, mo, d) * 86_400
        var fraction = 0.0
        if i < b.count {
            guard b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: " ") else { return nil }
            i += 1
            guard let h = number(2), expect(":"), let mi = number(2), h < 24, mi < 60 else { return nil }
            seconds += h * 3600 + mi * 60
            if expect(":") {
                guard let s = number(2), s < 61 else { return nil }
                seconds += s
                if expect(".") {
                    var scale = 0.1
                    var any = false
                    while i < b.count, b[i] >= 48, b[i] <= 57 {
                        fraction += Double(b[i] - 48) * scale
                        scale /= 10
                        i += 1
                        any = true
                    }
                    guard any else { return nil }
                }
            }
            if i < b.count {
                if expect("Z") {
                } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
                    let sign: Int64 = b[i] == UInt8(ascii: "+") ? 1 : -1
                    i += 1
                    guard let oh = number(2) else { return nil }
                    _ = expect(":")
                    let om = number(2) ?? 0
                    seconds -= sign * (oh * 3600 + om * 60)
                } else {
                    return nil
                }
            }
        }
        guard i == b.count else { return nil }
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    // Days since 1970-01-01 ⇄ proleptic Gregorian dates (H. Hinnant's civil-date algorithms).
    static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
