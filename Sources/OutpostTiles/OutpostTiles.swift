// OutpostTiles: tiling schemes, tile sources, Compact Cache V2 bundles, .tpkx and MBTiles (DESIGN §7). Its code lands with the tiles issue.
