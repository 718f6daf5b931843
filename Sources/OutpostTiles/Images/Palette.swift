/// Exact palettes of RGBA pixels, for indexed PNG tiles.
public enum Palette {
    /// Indices and RGBA entries (`0xRRGGBBAA`, in order of first appearance) when the pixels
    /// hold at most 256 colours; nil otherwise. Runs of one colour (most of a map tile) cost a
    /// comparison each; other pixels a probe of a small open-addressing table.
    public static func index(_ pixels: [UInt8]) -> ([UInt8], [UInt32])? {
        let count = pixels.count / 4
        var palette: [UInt32] = []
        palette.reserveCapacity(256)
        // 1,024 slots for at most 256 colours: short probes. A slot holds colour + 1 (0: empty).
        var keys = [UInt64](repeating: 0, count: 1024)
        var values = [UInt8](repeating: 0, count: 1024)
        var indices = [UInt8](repeating: 0, count: count)
        let ok = pixels.withUnsafeBytes { raw -> Bool in
            let words = raw.bindMemory(to: UInt32.self)
            var last: UInt32 = 0, lastIndex: UInt8 = 0, haveLast = false
            for p in 0..<count {
                let word = words[p]
                if haveLast && word == last {
                    indices[p] = lastIndex
                    continue
                }
                var slot = Int((word &* 0x9E37_79B1) >> 22)
                while true {
                    let key = keys[slot]
                    if key == UInt64(word) + 1 {
                        lastIndex = values[slot]
                        break
                    }
                    if key == 0 {
                        guard palette.count < 256 else { return false }
                        keys[slot] = UInt64(word) + 1
                        lastIndex = UInt8(palette.count)
                        values[slot] = lastIndex
                        // Memory order R, G, B, A: the entry as 0xRRGGBBAA.
                        palette.append(UInt32(bigEndian: word))
                        break
                    }
                    slot = (slot + 1) & 1023
                }
                last = word
                haveLast = true
                indices[p] = lastIndex
            }
            return true
        }
        return ok ? (indices, palette) : nil
    }

    /// Whether every pixel of RGBA `pixels` is opaque.
    public static func isOpaque(_ pixels: [UInt8]) -> Bool {
        var i = 3
        while i < pixels.count {
            if pixels[i] != 255 { return false }
            i += 4
        }
        return true
    }

    /// The RGB bytes of RGBA `pixels` (alpha dropped).
    public static func rgb(_ pixels: [UInt8]) -> [UInt8] {
        let count = pixels.count / 4
        return [UInt8](unsafeUninitializedCapacity: count * 3) { out, n in
            for p in 0..<count {
                out[p * 3] = pixels[p * 4]
                out[p * 3 + 1] = pixels[p * 4 + 1]
                out[p * 3 + 2] = pixels[p * 4 + 2]
            }
            n = count * 3
        }
    }
}
