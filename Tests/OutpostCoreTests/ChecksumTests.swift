import Foundation
import OutpostDigest
import Testing

@testable import OutpostCore

@Suite("Checksums")
struct ChecksumTests {
    @Test func sha256MatchesTheFIPSVectors() {
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var million = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { million.update(chunk) }
        #expect(SHA256.hexString(million.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // Feeding in odd pieces gives the same digest as one piece.
        var pieces = SHA256()
        let text = Array("The quick brown fox jumps over the lazy dog, again and again and again.".utf8)
        for i in stride(from: 0, to: text.count, by: 7) { pieces.update(Array(text[i..<min(i + 7, text.count)])) }
        #expect(SHA256.hexString(pieces.finalize()) == SHA256.hex(text))
    }

    @Test func aCopyOfAHasherHashesOnByItself() {
        var first = SHA256()
        first.update("abc")
        var second = first
        second.update("dbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
        #expect(SHA256.hexString(first.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexString(second.finalize()) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // A copy finished first leaves the original's state alone.
        var third = SHA256()
        third.update("ab")
        var fourth = third
        #expect(SHA256.hexString(fourth.finalize()) == SHA256.hex("ab"))
        third.update("c")
        #expect(SHA256.hexString(third.finalize()) == SHA256.hex("abc"))
        #expect(SHA256.hex(Data("abc".utf8)) == SHA256.hex("abc"))
    }

    @Test func crc32MatchesZlib() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([]) == 0)
    }
}
