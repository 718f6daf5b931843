import Foundation
import Hummingbird
import OutpostCore

/// The few `…/sharing/rest` resources that ArcGIS clients built for a portal (the ArcGIS API for
/// Python's `GIS`) read before they talk to a server: what the server is, how to sign in, and
/// who the caller is. They say plainly what this is — a stand-alone ArcGIS-REST-shaped server with
/// no content, groups or hosted services — rather than imitate a portal's catalogue.
struct PortalRoutes {
    let security: Security
    let caller: Caller
    let publicBase: String
    let writing: ResponseWriting

    func respond(_ route: [String]) throws -> Response? {
        switch route {
        case []:
            return writing.json(["currentVersion": "11.1"])
        case ["info"]:
            return writing.json([
                "owningSystemUrl": .string("\(publicBase)/arcgis"), "currentVersion": "11.1", "fullVersion": "11.1.0",
                "authInfo": security.authInfo(publicBase: publicBase),
            ])
        case ["portals", "self"]:
            var portal: [String: JSONValue] = [
                "id": "outpost", "name": "Outpost", "portalName": "Outpost", "isPortal": true, "portalMode": "singletenant",
                "description": "Outpost: a stand-alone ArcGIS-REST-shaped server (FeatureServer, MapServer). It has no content, items, groups or hosted services.",
                "currentVersion": "11.1", "allSSL": .bool(publicBase.hasPrefix("https:")), "supportsOAuth": false, "supportsHostedServices": false,
                "helperServices": [:], "portalProperties": [:], "urlKey": .null, "customBaseUrl": .null,
                "portalHostname": .string(URL(string: publicBase)?.host.map { host in URL(string: publicBase)?.port.map { "\(host):\($0)" } ?? host } ?? ""),
                "restUrl": .string("\(publicBase)/arcgis/sharing/rest"),
            ]
            if let user = Self.user(caller) { portal["user"] = user }
            return writing.json(.object(portal))
        case ["community", "self"]:
            guard let user = Self.user(caller) else { throw ServiceError(401, "Token Required", code: 499) }
            return writing.json(user)
        case let path where path.count == 3 && path[0] == "community" && path[1] == "users":
            guard let user = Self.user(caller), user["username"]?.stringValue?.lowercased() == path[2].lowercased() else {
                throw ServiceError(403, "You do not have permissions to access this resource or perform this operation.")
            }
            return writing.json(user)
        default:
            return nil
        }
    }

    /// The signed-in user as a portal describes users; nil for a caller without a user.
    static func user(_ caller: Caller) -> JSONValue? {
        guard case .user(let user) = caller else { return nil }
        let role: String
        switch user.role {
        case .admin: role = "org_admin"
        case .editor: role = "org_publisher"
        case .viewer: role = "org_user"
        }
        var privileges = ["portal:user:viewOrgItems"]
        if user.role != .viewer { privileges += ["features:user:edit", "features:user:fullEdit"] }
        return [
            "username": .string(user.name), "fullName": .string(user.name), "role": .string(role), "userLicenseTypeId": "creatorUT",
            "privileges": .array(privileges.map { .string($0) }), "orgId": "outpost", "access": "private", "groups": [],
        ]
    }
}
