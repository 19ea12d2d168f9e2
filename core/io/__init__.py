"""Files and caches, below everything else: strict and bounded JSON (:mod:`.strict_json`),
outputs that never clobber (:mod:`.atomic`), the cache root (:mod:`.cache`) and the embedding
cache, identity keys for derived-data caches (:mod:`.identity`), and whether a file may run code
(:mod:`.trust`)."""
