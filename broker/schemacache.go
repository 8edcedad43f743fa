package broker

import (
	"runtime"
	"sync"
	"weak"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// What a compiled schema is estimated to keep in memory (schemaShape.cost), measured by
// TestSchemaCostEstimate: a compiled schema object keeps about 0.8 KiB, a byte of text (enums,
// defaults) up to 9 bytes, a regular-expression instruction about 80 bytes; each is rounded up.
const (
	nodeBytes    = 1 << 10
	textBytes    = 12
	regexpBytes  = 128
	metaRefBytes = 128 << 10 // a meta-schema compiled in (about 90 KiB)
)

// cost estimates the memory of the schema compiled from text of n bytes of this shape, its key
// in the cache included.
func (sh schemaShape) cost(n int) int64 {
	return int64(n) + int64(n)*textBytes + int64(sh.nodes)*nodeBytes + int64(sh.metaRefs)*metaRefBytes + int64(sh.insts)*regexpBytes
}

// schemaCache shares compiled schemas between the declarations of the same schema text (a
// compiled schema is immutable and safe for concurrent validation). It holds them weakly: the
// tools that use a schema keep it alive, and once none does — its sessions ended, its slots
// expired, its declarations were replaced — the garbage collector frees it and its entry goes
// with it (runtime.AddCleanup). So nothing needs releasing, whatever path drops a tool set.
// The entries' estimated memory is bounded by max: past it a schema is still compiled and used,
// only not shared. A schema enters the cache only when its declaration is applied (publish), so
// a rejected declaration leaves nothing.
type schemaCache struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry // by compact schema text
	bytes   int64                  // the entries' estimated memory
	max     int64
}

type cacheEntry struct {
	key    string
	schema weak.Pointer[jsonschema.Schema]
	cost   int64
}

// maxCacheBytes bounds the schema cache's estimated memory (about 60 of the largest schemas
// the bounds allow, or thousands of ordinary ones).
const maxCacheBytes = 64 << 20

// schemas is the process's schema cache.
var schemas = newSchemaCache(maxCacheBytes)

func newSchemaCache(max int64) *schemaCache {
	return &schemaCache{entries: make(map[string]*cacheEntry), max: max}
}

// lookup returns the live schema compiled from text key, or nil.
func (c *schemaCache) lookup(key string) *jsonschema.Schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		return e.schema.Value()
	}
	return nil
}

// publish shares s, compiled from text key, whose memory is estimated at cost: it returns the
// schema to use, the one already shared for key if there is one.
func (c *schemaCache) publish(key string, s *jsonschema.Schema, cost int64) *jsonschema.Schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		if shared := e.schema.Value(); shared != nil {
			return shared
		}
		c.remove(e) // its schema was freed; its cleanup has not run yet
	}
	if c.bytes+cost > c.max {
		return s
	}
	e := &cacheEntry{key: key, schema: weak.Make(s), cost: cost}
	c.entries[key] = e
	c.bytes += cost
	runtime.AddCleanup(s, c.freed, e)
	return s
}

// freed drops the entry of a schema the garbage collector freed.
func (c *schemaCache) freed(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.key] == e {
		c.remove(e)
	}
}

func (c *schemaCache) remove(e *cacheEntry) {
	delete(c.entries, e.key)
	c.bytes -= e.cost
}

// stats are the number of entries and their estimated memory.
func (c *schemaCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}
