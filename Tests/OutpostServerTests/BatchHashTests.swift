import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import Testing

@Suite("A batch's hash on the server")
struct BatchHashTests {
    /// The server hashes with swift-crypto, the client with its own SHA-256: the ledger compares
    /// the two, so they must agree on every input (empty, partial blocks, block edges, megabytes).
    @Test func theServersHashIsTheClients() {
        var random = FastRandomGenerator(seed: 11)
        for size in [0, 1, 55, 56, 63, 64, 65, 1_000, 1_048_576 + 17] {
            let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &random) })
            #expect(UploadBatch.serverHash(bytes) == UploadBatch.hash(bytes), "\(size) bytes")
        }
        // The standard's own example.
        #expect(UploadBatch.serverHash(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
