// Re-exported: the names below are geoprocessing's API, and its users call the REST client's members through them.
@_exported import OutpostREST

/// A GPServer answered with the ArcGIS error JSON, or not as a GPServer answers: the REST
/// client's `ArcGISError` under the name geoprocessing's API has always used.
public typealias GeoprocessingError = ArcGISError

/// How a ``GeoprocessingTask`` reaches its service: the REST client's transport
/// (`RESTTransport`). Network failures are `RemoteJobUnreachable` (a polling job rides them
/// out for a while); answers that will not get better are ``GeoprocessingError``.
public typealias GPTransport = RESTTransport

/// ``GPTransport`` over HTTP: the REST client (`RESTClient`), with an optional token.
public typealias HTTPGPTransport = RESTClient
