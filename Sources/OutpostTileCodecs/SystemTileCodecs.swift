import OutpostTiles

/// The system's image libraries as OutpostTiles' codecs: JPEG through libjpeg-turbo, WebP through
/// libwebp, PNG's DEFLATE through libdeflate. A product of its own so that apps which need none of
/// them (the sync stack on iOS) link none of them.
public enum SystemTileCodecs {
    /// Installs the three in `TileCodecs` (once per process; later calls do nothing).
    public static func install() {
        _ = installed
    }

    private static let installed: Void = {
        TileCodecs.install(jpeg: TurboJPEG.codec, webp: LibWebP.codec, deflate: Libdeflate.codec)
    }()
}
