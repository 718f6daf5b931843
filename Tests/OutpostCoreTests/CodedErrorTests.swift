import Foundation
import Testing

@testable import OutpostCore

/// The error shape the modules share: a code, a message, the input at fault, what caused it.
@Suite("Coded errors")
struct CodedErrorTests {
    enum Parse: String, FailureCode {
        case malformed
        case tooLarge
        enum Input: String, Hashable, Sendable { case body, header }
    }

    enum Plain: String, FailureCode { case gone }

    struct Cause: Error, Sendable {}

    @Test func anErrorIsItsCodeMessageAndInputWhatCausedItAside() {
        let a = CodedError<Parse>(.malformed, "the body ends early", input: .body, underlying: Cause())
        let b = CodedError<Parse>(.malformed, "the body ends early", input: .body)
        #expect(a == b && Set([a, b]).count == 1, "the underlying error is not compared")
        #expect(a != CodedError<Parse>(.malformed, "the body ends early", input: .header))
        #expect(a != CodedError<Parse>(.tooLarge, "the body ends early", input: .body))
        #expect(a.underlying is Cause && b.underlying == nil)
        #expect(a.description == "the body ends early" && "\(a)" == "the body ends early")
        #expect(a.jobFailureCause == "malformed", "a job that failed with it keeps its code as the cause")
        let plain = CodedError<Plain>(.gone, "no such file")
        #expect(plain.input == nil && plain.code.rawValue == "gone")
    }
}
