/// Rows of `gpkg_spatial_ref_sys` (GeoPackage 1.3 §1.1.2, r10–r12): the three mandatory ones
/// (4326, -1, 0) and Web Mercator, with their EPSG WKT 1 definitions.
enum SpatialReferenceSystems {
    struct Row {
        let name: String
        let id: Int
        let organization: String
        let organizationID: Int
        let definition: String
        let description: String
    }

    static let wgs84 = Row(
        name: "WGS 84 geodetic", id: 4326, organization: "EPSG", organizationID: 4326,
        definition:
            #"GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AXIS["Latitude",NORTH],AXIS["Longitude",EAST],AUTHORITY["EPSG","4326"]]"#,
        description: "longitude/latitude coordinates in decimal degrees on the WGS 84 spheroid")

    static let webMercator = Row(
        name: "WGS 84 / Pseudo-Mercator", id: 3857, organization: "EPSG", organizationID: 3857,
        definition:
            #"PROJCS["WGS 84 / Pseudo-Mercator",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG","4326"]],PROJECTION["Mercator_1SP"],PARAMETER["central_meridian",0],PARAMETER["scale_factor",1],PARAMETER["false_easting",0],PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],EXTENSION["PROJ4","+proj=merc +a=6378137 +b=6378137 +lat_ts=0 +lon_0=0 +x_0=0 +y_0=0 +k=1 +units=m +nadgrids=@null +wktext +no_defs"],AUTHORITY["EPSG","3857"]]"#,
        description: "spherical Mercator used by web maps")

    static let undefinedCartesian = Row(
        name: "Undefined Cartesian SRS", id: -1, organization: "NONE", organizationID: -1,
        definition: "undefined", description: "undefined Cartesian coordinate reference system")

    static let undefinedGeographic = Row(
        name: "Undefined geographic SRS", id: 0, organization: "NONE", organizationID: 0,
        definition: "undefined", description: "undefined geographic coordinate reference system")

    static let all = [wgs84, webMercator, undefinedCartesian, undefinedGeographic]

    static func row(for wkid: Int) -> Row? { all.first { $0.id == wkid } }
}
