import Foundation

/// A preplanned area's package on the server: an offline map folder made ahead by `outpost
/// offline prepare`, served file by file.
public enum PreplannedPackage {
    /// One file of a package.
    public struct File: Sendable {
        /// Its path below the package's folder.
        public var path: String
        /// Its size in bytes.
        public var size: Int64
    }

    /// The files crews download (paths relative to `folder`, sorted), or nil when the folder holds
    /// no finished package (no `map.json`, or a database with pages still in its log). Working files are left out: SQLite's `-wal`/`-shm`
    /// (a package is written with its databases closed), sync locks, partial files and hidden
    /// job folders.
    public static func files(in folder: URL) -> [File]? {
        guard FileManager.default.fileExists(atPath: folder.appendingPathComponent("map.json").path),
            let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey], options: [.skipsHiddenFiles])
        else { return nil }
        var files: [File] = []
        let root = folder.standardizedFileURL.path
        for case let url as URL in walker {
            let values = try? url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey])
            guard values?.isRegularFile == true else { continue }
            let name = url.lastPathComponent
            // A database whose log still holds pages is not a sealed package (prepare closes
            // every database, which copies its log back).
            if name.hasSuffix("-wal"), (values?.fileSize ?? 0) > 0 { return nil }
            guard !["-wal", "-shm", "-journal", "-synclock", ".partial"].contains(where: { name.hasSuffix($0) }) else { continue }
            let path = String(url.standardizedFileURL.path.dropFirst(root.count + 1))
            files.append(File(path: path, size: Int64(values?.fileSize ?? 0)))
        }
        return files.sorted { $0.path < $1.path }
    }
}
