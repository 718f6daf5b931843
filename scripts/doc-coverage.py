"""Prints each documentation archive's coverage and checks it against the floors.

Coverage is DocC's own report (documentation-coverage.json, written with
--experimental-documentation-coverage): of a product's public symbols (types, members,
globals; not the "Implementations" groups DocC makes, which have no source to document), the
share with a summary. Every product must reach MINIMUM; the floors file (a line
"<product> <percent>" per product) holds each at its figure, so none slips back.
"""
import json
import pathlib
import sys

MINIMUM = 95.0
out, floors_file = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
floors = {}
for line in floors_file.read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
        name, percent = line.split()
        floors[name] = float(percent)

failed = []
rows = []
for archive in sorted(out.glob("*.doccarchive")):
    product = archive.name.removesuffix(".doccarchive")
    entries = json.loads((archive / "documentation-coverage.json").read_text())
    symbols = [e for e in entries if e["kind"]["isSymbol"]]
    documented = sum(1 for e in symbols if e["hasAbstract"])
    percent = 100.0 * documented / len(symbols) if symbols else 100.0
    floor = max(floors.get(product, 0.0), MINIMUM)
    rows.append((product, documented, len(symbols), percent, floor))
    if percent + 1e-9 < floor:
        failed.append(product)

print(f"{'product':<22} {'documented':>10} {'symbols':>8} {'coverage':>9} {'floor':>6}")
for product, documented, total, percent, floor in rows:
    print(f"{product:<22} {documented:>10} {total:>8} {percent:>8.1f}% {floor:>5.1f}%")
if failed:
    print("docs: coverage fell below its floor for " + ", ".join(failed), file=sys.stderr)
    sys.exit(1)
