package ddl

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Message is one captured event: Kind "drop" (sql_drop: the objects a
// statement dropped) or "command" (ddl_command_end: the statement itself
// and the objects it created or altered).
type Message struct {
	V          int      `json:"v"`
	Kind       string   `json:"kind"`
	Xid        uint32   `json:"xid"`
	Key        string   `json:"key"`
	Seq        int      `json:"seq"`
	Mark       bool     `json:"mark"`
	Tag        string   `json:"tag"`
	Query      string   `json:"query"`
	SearchPath string   `json:"search_path"`
	Role       string   `json:"role"`
	Objects    []Object `json:"objects"`

	// Body and Sig are the signed JSON and its signature (install.go).
	Body string `json:"-"`
	Sig  string `json:"-"`
}

// sigLen is the length of a message's signature: hex SHA-256.
const sigLen = 64

// Object is one object a statement touched, as the event trigger
// functions name it. Table is the table it belongs to ([schema, name,
// relkind]) where the capture could find it: for a created or altered
// object; a dropped object names its table only through Names.
type Object struct {
	Type     string   `json:"type"`
	Schema   string   `json:"schema"`
	Name     string   `json:"name"`
	Identity string   `json:"identity"`
	Tag      string   `json:"tag"`
	Names    []string `json:"names"`
	Temp     bool     `json:"temp"`
	Table    []string `json:"table"`
}

// TableName is a table by schema and name.
type TableName struct{ Schema, Name string }

// Tables returns the table the object concerns (itself, or the table of
// a column, constraint, index, trigger...), as named after its statement.
// Objects of other kinds (functions, types, sequences of their own...)
// name no table. An index dropped on its own names no table (its table is
// gone from the catalog by then): ok is false and the caller looks the
// index up on the target.
func (o Object) Tables() (t TableName, ok bool) {
	if len(o.Table) >= 2 {
		if len(o.Table) >= 3 && o.Table[2] == "S" {
			return TableName{}, false
		}
		return TableName{o.Table[0], o.Table[1]}, true
	}
	switch o.Type {
	case "table", "foreign table", "view", "materialized view":
		if o.Name != "" {
			return TableName{o.Schema, o.Name}, true
		}
	case "table column", "table constraint", "trigger", "rule", "policy", "default value":
		if len(o.Names) >= 2 {
			return TableName{o.Names[0], o.Names[1]}, true
		}
	}
	return TableName{}, false
}

// TableOID returns the source OID of the object's table, 0 when the
// capture could not find it (a dropped object).
func (o Object) TableOID() uint32 {
	if len(o.Table) < 4 {
		return 0
	}
	n, err := strconv.ParseUint(o.Table[3], 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

// Parent returns the partitioned table of a partition.
func (o Object) Parent() (TableName, bool) {
	if len(o.Table) < 6 || o.Table[5] == "" {
		return TableName{}, false
	}
	return TableName{o.Table[4], o.Table[5]}, true
}

// IsTable reports whether the object is a table itself (not a part of one).
func (o Object) IsTable() bool { return o.Type == "table" }

// Parse decodes a message's content.
func Parse(content []byte) (*Message, error) {
	var m Message
	if len(content) < sigLen {
		return nil, fmt.Errorf("a captured DDL message of %d bytes: too short for its signature", len(content))
	}
	m.Sig, m.Body = string(content[:sigLen]), string(content[sigLen:])
	if err := json.Unmarshal(content[sigLen:], &m); err != nil {
		return nil, fmt.Errorf("decoding a captured DDL message: %w", err)
	}
	if m.V < 1 || m.V > Version {
		return nil, fmt.Errorf("a captured DDL message of version %d, this walapply reads up to %d: upgrade walapply", m.V, Version)
	}
	if m.Kind != "drop" && m.Kind != "command" {
		return nil, fmt.Errorf("a captured DDL message of unknown kind %q", m.Kind)
	}
	return &m, nil
}
