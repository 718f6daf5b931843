/// The error shape Outpost's modules share: a code saying what kind of failure it is, a message
/// for a person, the input at fault when one was, and the error that caused it (GRDB's
/// `DatabaseError` is the model). A module names its codes (and inputs) in a ``FailureCode``
/// enum and its error is this type of them: `LocatorError` is `CodedError<LocatorFailure>`.
public struct CodedError<Failure: FailureCode>: Error, Sendable, Hashable, CustomStringConvertible, JobFailureCause {
    /// What kind of failure it is.
    public typealias Code = Failure
    /// The inputs an error may name.
    public typealias Input = Failure.Input

    /// What kind of failure it is.
    public var code: Failure
    /// What went wrong, for a person.
    public var message: String
    /// The input at fault, for an error about one.
    public var input: Failure.Input?
    /// The error that caused this one, when there was one (not compared by `==`).
    public var underlying: (any Error & Sendable)?

    /// An error of this code and message.
    public init(_ code: Failure, _ message: String, input: Failure.Input? = nil, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.input = input
        self.underlying = underlying
    }

    public var description: String { message }

    /// The code's name, kept as the cause of a job that failed with this error.
    public var jobFailureCause: String { code.rawValue }

    public static func == (a: Self, b: Self) -> Bool { a.code == b.code && a.message == b.message && a.input == b.input }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(input)
    }
}

/// The codes of a module's ``CodedError``, and the inputs its errors may name.
public protocol FailureCode: RawRepresentable, Hashable, Sendable where RawValue == String {
    /// The inputs an error may name (``NoInput`` when none).
    associatedtype Input: Hashable & Sendable = NoInput
}

/// No input: for errors that never name one.
public enum NoInput: Hashable, Sendable {}
