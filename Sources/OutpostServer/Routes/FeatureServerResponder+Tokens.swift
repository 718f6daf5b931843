import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OutpostCore
import OutpostLocator
import OutpostRouting
import OutpostGeoprocessing
import OutpostProtocol
import OutpostStorage
import OutpostTiles

/// The server's `/arcgis/rest/info` answer and token issuing (`generateToken`).
extension FeatureServerResponder {
    /// `/arcgis/rest/info`: the version, and how to sign in.
    func info(_ request: Request) -> JSONValue {
        [
            "currentVersion": ServiceInfo.currentVersion, "fullVersion": "11.1.0", "owningSystemUrl": .null,
            "authInfo": security.authInfo(publicBase: PublicURL(request, configuration: configuration).base),
        ]
    }

    /// `/arcgis/tokens/generateToken` (also `/arcgis/sharing/rest/generateToken` and
    /// `/sharing/generateToken`): a token for a user's name and password, by POST (a password never
    /// travels in a URL) unless the server allows it in the URL over HTTPS
    /// (``ServerConfiguration/tokenRequestsInURL``). A browser's GET gets a sign-in form.
    func tokens(_ call: RoutedRequest) async throws -> Response {
        let (request, parameters) = (call.request, call.parameters)
        let format = try parameters.format()
        var writing = ResponseWriting(request: request, pretty: format == "pjson")
        let view = DirectoryView(segments: ["tokens", "generateToken"], query: request.uri.query)
        let secure = PublicURL(request, configuration: configuration).base.hasPrefix("https:")
        let passwordInURL = request.uri.queryParameters["password"] != nil
        // A password in the URL only when the server allows it, and never over plain HTTP.
        let urlAllowed = passwordInURL && configuration.tokenRequestsInURL
        if urlAllowed {
            guard secure else { throw ServiceError(400, "Unable to generate token.", details: ["a password in a URL is taken over HTTPS only"]) }
        } else if request.method == .get {
            guard DirectoryView.wanted(request, parameters) else {
                throw ServiceError.methodNotAllowed("generateToken takes a POST: a password never travels in a URL", allowed: ["POST"])
            }
            return writing.html(view.operation(title: "Generate Token", description: "Sign in for a token to pass as token= or Authorization: Bearer.", form: DirectoryForms.generateToken, result: nil))
        }
        guard request.method == .post || (urlAllowed && request.method == .get) else {
            throw ServiceError.methodNotAllowed("\(request.method) is not allowed; use POST", allowed: ["POST"])
        }
        if passwordInURL, !urlAllowed {
            throw ServiceError(400, "Unable to generate token.", details: ["send the password in the POST body, not the URL"])
        }
        let answer = try await security.generateToken(parameters, request: request, remote: call.context.remoteAddress, secure: secure)
        if DirectoryView.wanted(request, parameters) { writing.directory = (view, .operation(description: "Your token:", form: nil)) }
        return writing.json(answer)
    }

}
