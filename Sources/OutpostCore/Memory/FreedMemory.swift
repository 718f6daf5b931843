#if canImport(Glibc)
    import Glibc
#endif

/// Hands heap memory that a large operation freed back to the system.
///
/// glibc keeps freed blocks in its per-thread arenas and returns them only when the top of an
/// arena is free: after a replica of millions of features was written, a server kept ~180 MB of
/// freed heap per million features resident for the rest of its life (measured: 182 MB resident
/// before, 59 MB after a trim). Called when a job or a bulk import ends; costs a few
/// milliseconds. Elsewhere than glibc, or when glibc's allocator is not the one in use, it does
/// nothing.
public enum FreedMemory {
    /// Returns freed heap to the system (`malloc_trim` on glibc; nothing elsewhere).
    public static func release() {
        #if canImport(Glibc)
            _ = trim?(0)
        #endif
    }

    /// Whether ``release()`` trims: on glibc, unless a sanitizer's allocator stands in for it.
    static var trims: Bool {
        #if canImport(Glibc)
            trim != nil
        #else
            false
        #endif
    }

    /// Whether a sanitizer's runtime (AddressSanitizer, ThreadSanitizer, the fuzzer's ASan)
    /// serves malloc in this process: every one of them exports its allocator's interface.
    static var sanitizerAllocates: Bool {
        #if canImport(Glibc)
            dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__sanitizer_get_allocated_size") != nil
        #else
            false
        #endif
    }

    #if canImport(Glibc)
        // malloc_trim is declared in <malloc.h>, which the Glibc module does not export: looked up
        // once by name. Not when a sanitizer allocates: glibc's arenas then were never set up, and
        // its malloc_trim walking them crashed the first AddressSanitizer run (a null read in
        // mtrim, from the first bulk import).
        private typealias Trim = @convention(c) (Int) -> Int32
        private static let trim: Trim? =
            sanitizerAllocates
            ? nil
            : dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim").map { unsafeBitCast($0, to: Trim.self) }
    #endif
}
