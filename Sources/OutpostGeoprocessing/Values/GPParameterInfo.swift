import OutpostCore

/// A task's parameter as its task info describes it (ArcGIS REST `parameters` entries).
public struct GPParameterInfo: Hashable, Sendable {
    /// Whether a parameter is an input or an output.
    public enum Direction: String, Sendable {
        /// An input.
        case input = "esriGPParameterDirectionInput"
        /// An output.
        case output = "esriGPParameterDirectionOutput"
    }

    /// Whether a parameter must be given.
    public enum Kind: String, Sendable {
        /// It must be given.
        case required = "esriGPParameterTypeRequired"
        /// It may be left out (its default applies).
        case optional = "esriGPParameterTypeOptional"
        /// An output the task always gives.
        case derived = "esriGPParameterTypeDerived"
    }

    /// The parameter's name, as requests spell it.
    public var name: String
    /// Its data type.
    public var dataType: GPDataType
    /// Whether it is an input or an output.
    public var direction: Direction
    /// Whether it must be given.
    public var kind: Kind
    /// Its name as people see it.
    public var displayName: String
    /// What it is for.
    public var description: String
    /// The group it is shown in.
    public var category: String
    /// Its value when not given.
    public var defaultValue: GPValue?
    /// Allowed values (strings, for GPString parameters), empty for any.
    public var choiceList: [String]

    /// A parameter of these values.
    public init(
        name: String, dataType: GPDataType, direction: Direction = .input, kind: Kind = .required, displayName: String? = nil, description: String = "",
        category: String = "", defaultValue: GPValue? = nil, choiceList: [String] = []
    ) {
        self.name = name
        self.dataType = dataType
        self.direction = direction
        self.kind = kind
        self.displayName = displayName ?? name
        self.description = description
        self.category = category
        self.defaultValue = defaultValue
        self.choiceList = choiceList
    }

    /// The parameter as task-info JSON.
    public var json: JSONValue {
        get throws {
            var out: [String: JSONValue] = [
                "name": .string(name), "dataType": .string(dataType.description), "direction": .string(direction.rawValue),
                "parameterType": .string(kind.rawValue), "displayName": .string(displayName), "description": .string(description),
                "category": .string(category), "defaultValue": try defaultValue?.json ?? .null,
            ]
            if !choiceList.isEmpty { out["choiceList"] = .array(choiceList.map { .string($0) }) }
            return .object(out)
        }
    }

    /// A parameter from task-info JSON.
    /// - Throws: ``GPValueError`` for a parameter without a name, or of an unknown type, direction or kind.
    public init(json: JSONValue) throws {
        guard let name = json["name"]?.stringValue, !name.isEmpty else { throw GPValueError("a parameter needs a name") }
        guard let typeName = json["dataType"]?.stringValue, let type = GPDataType(name: typeName) else {
            throw GPValueError(parameter: name, "unknown data type \(json["dataType"]?.stringValue ?? "(none)")")
        }
        let direction = try json["direction"]?.stringValue.map { text in
            guard let d = Direction(rawValue: text) else { throw GPValueError(parameter: name, "unknown direction \(text)") }
            return d
        } ?? .input
        let kind = try json["parameterType"]?.stringValue.map { text in
            guard let k = Kind(rawValue: text) else { throw GPValueError(parameter: name, "unknown parameter type \(text)") }
            return k
        } ?? .required
        var value: GPValue?
        if let d = json["defaultValue"], !d.isNull { value = try GPValue(json: d, as: type, parameter: name) }
        self.init(
            name: name, dataType: type, direction: direction, kind: kind, displayName: json["displayName"]?.stringValue,
            description: json["description"]?.stringValue ?? "", category: json["category"]?.stringValue ?? "", defaultValue: value,
            choiceList: (json["choiceList"]?.arrayValue ?? []).compactMap(\.stringValue))
    }

    /// Checks an input against this parameter: its type (already), the choice list, and that a
    /// required one is given. Returns the value to use (the default when none was given).
    public func accept(_ value: GPValue?) throws -> GPValue? {
        guard let value else {
            if kind == .required, direction == .input, defaultValue == nil { throw GPValueError(parameter: name, "is required") }
            return defaultValue
        }
        guard value.dataType == dataType else { throw GPValueError(parameter: name, "expects a \(dataType), not a \(value.dataType)") }
        if !choiceList.isEmpty {
            let given: [String]
            switch value {
            case .string(let s): given = [s]
            case .multiValue(_, let items): given = items.compactMap { if case .string(let s) = $0 { s } else { nil } }
            default: given = []
            }
            if let wrong = given.first(where: { !choiceList.contains($0) }) {
                throw GPValueError(parameter: name, "\"\(wrong)\" is not one of \(choiceList.joined(separator: ", "))")
            }
        }
        return value
    }
}
