import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Testing

@testable import OutpostServer

/// The public address behind a proxy: the headers proxies send, in their order of precedence, and
/// values that must not reach a URL.
@Suite("Public URL")
struct PublicURLTests {
    func base(_ headers: [(String, String)], configured: String? = nil) -> String {
        var fields = HTTPFields()
        for (name, value) in headers { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        let head = HTTPRequest(method: .get, scheme: "http", authority: "10.0.0.5:8080", path: "/arcgis/rest/services", headerFields: fields)
        let request = Request(head: head, body: .init(buffer: ByteBuffer()))
        return PublicURL(request, configured: configured.flatMap(URL.init(string:))).base
    }

    @Test func proxiesSayWhereClientsAre() {
        #expect(base([]) == "http://10.0.0.5:8080")
        #expect(base([("X-Forwarded-Host", "gis.example.org"), ("X-Forwarded-Proto", "https")]) == "https://gis.example.org")
        #expect(base([("X-Forwarded-Host", "gis.example.org, inner.proxy"), ("X-Forwarded-Prefix", "/maps/")]) == "http://gis.example.org/maps")
        #expect(base([("Forwarded", #"for=192.0.2.60;proto=https;host="gis.example.org:8443", for=10.1.1.1;host=inner"#)]) == "https://gis.example.org:8443")
        // Forwarded wins over X-Forwarded-*, a configured address over both.
        #expect(base([("Forwarded", "host=a.example;proto=https"), ("X-Forwarded-Host", "b.example")]) == "https://a.example")
        #expect(base([("Forwarded", "host=a.example")], configured: "https://public.example/gis/") == "https://public.example/gis")
        #expect(base([("X-Forwarded-Host", "[2001:db8::1]:443"), ("X-Forwarded-Proto", "https")]) == "https://[2001:db8::1]:443")
    }

    @Test func headerValuesCannotInjectIntoURLs() {
        #expect(base([("X-Forwarded-Host", "evil.example/path?x=<y>")]) == "http://10.0.0.5:8080")
        #expect(base([("X-Forwarded-Host", "a b")]) == "http://10.0.0.5:8080")
        #expect(base([("X-Forwarded-Proto", "javascript")]) == "http://10.0.0.5:8080")
        #expect(base([("X-Forwarded-Prefix", "/../admin")]) == "http://10.0.0.5:8080")
        #expect(base([("X-Forwarded-Prefix", "gis")]) == "http://10.0.0.5:8080")
        #expect(base([("X-Forwarded-Prefix", "/a%2Fb")]) == "http://10.0.0.5:8080")
        #expect(base([("Forwarded", #"host="evil.example\"><script>""#)]) == "http://10.0.0.5:8080")
    }
}
