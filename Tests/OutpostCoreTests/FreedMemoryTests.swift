import Foundation
import OutpostTestSupport
import Testing

@testable import OutpostCore

/// Freed heap handed back to the system, and left alone where glibc's allocator is not the one in
/// use: under AddressSanitizer, glibc's malloc_trim walked arenas that were never set up and
/// crashed the first bulk import.
@Suite("Freed memory")
struct FreedMemoryTests {
    @Test func releaseTrimsGlibcsHeapAndNoOtherAllocators() {
        let blocks = (0..<256).map { _ in UnsafeMutableRawPointer.allocate(byteCount: 1 << 16, alignment: 16) }
        for block in blocks { block.deallocate() }
        FreedMemory.release()
        // scripts/sanitize names its sanitizer; the plain suite runs on glibc's malloc.
        let sanitized = Sanitized.by != nil
        #expect(FreedMemory.sanitizerAllocates == sanitized)
        #if canImport(Glibc)
            #expect(FreedMemory.trims == !sanitized, "glibc's own heap is trimmed, a sanitizer's never")
        #endif
    }
}
