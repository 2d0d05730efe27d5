package schema

// columnsSQL lists the columns of the tables named by the parallel arrays
// $1 (schemas) and $2 (names) as "name type", by each table's position
// (from 1) in them; the other catalog queries of the plan (plan.go) take
// the tables the same way.
const columnsSQL = `SELECT t.ord, a.attname, format_type(a.atttypid, a.atttypmod)
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY t(s, n, ord)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY t.ord, a.attnum`

// typesSQL: the user-defined types the tables' columns use, through
// arrays and domains.
const typesSQL = `WITH RECURSIVE used(oid) AS (
  SELECT CASE WHEN ty.typelem <> 0 AND ty.typlen = -1 THEN ty.typelem ELSE ty.oid END
  FROM unnest($1::text[], $2::text[]) t(s, n)
  JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
  JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
  UNION
  SELECT CASE WHEN b.typelem <> 0 AND b.typlen = -1 THEN b.typelem ELSE b.oid END
  FROM used u JOIN pg_catalog.pg_type ty ON ty.oid = u.oid JOIN pg_catalog.pg_type b ON b.oid = ty.typbasetype
  WHERE ty.typtype = 'd')
SELECT n.nspname, ty.typname
FROM used u JOIN pg_catalog.pg_type ty ON ty.oid = u.oid JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND (ty.typtype IN ('e', 'd', 'r') OR ty.typtype = 'c' AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = ty.typrelid) = 'c')
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_type'::regclass AND d.objid = ty.oid AND d.deptype = 'e')`

// typeDefSQL describes a type for comparing both sides: its kind and an
// enum's labels.
const typeDefSQL = `SELECT ty.typtype::text || ':' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = ty.oid), '')
FROM pg_catalog.pg_type ty JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace WHERE n.nspname = $1 AND ty.typname = $2`

// funcsSQL: the functions the tables' triggers call.
const funcsSQL = `SELECT DISTINCT pn.nspname, p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')'
FROM unnest($1::text[], $2::text[]) t(s, n)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
JOIN pg_catalog.pg_trigger tg ON tg.tgrelid = c.oid AND NOT tg.tgisinternal
JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid JOIN pg_catalog.pg_namespace pn ON pn.oid = p.pronamespace
WHERE pn.nspname NOT IN ('pg_catalog', 'information_schema')`

// funcDefSQL describes a function for comparing both sides: its body.
const funcDefSQL = `SELECT p.prosrc FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')' = $2`

// seqsSQL: the sequences the tables own (serial and identity
// columns).
const seqsSQL = `SELECT sn.nspname, s.relname, ns.nspname, c.relname
FROM unnest($1::text[], $2::text[]) t(s, n)
JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n
JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = c.oid AND d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype IN ('a', 'i')
JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace`

// relExistsSQL: whether a relation of that schema and name exists.
const relExistsSQL = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)`

// relativesSQL: the partitioned tables above the published tables
// and the partitions below them, which pg_dump -t leaves out but a
// partition or a root needs.
const relativesSQL = `WITH RECURSIVE pub AS (
  SELECT c.oid FROM unnest($1::text[], $2::text[]) t(s, n)
  JOIN pg_catalog.pg_namespace ns ON ns.nspname = t.s
  JOIN pg_catalog.pg_class c ON c.relnamespace = ns.oid AND c.relname = t.n),
up(oid) AS (SELECT inhparent FROM pg_catalog.pg_inherits WHERE inhrelid IN (SELECT oid FROM pub)
  UNION SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid = up.oid),
down(oid) AS (SELECT inhrelid FROM pg_catalog.pg_inherits WHERE inhparent IN (SELECT oid FROM pub)
  UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN down ON i.inhparent = down.oid)
SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid IN (SELECT oid FROM up UNION SELECT oid FROM down) AND c.oid NOT IN (SELECT oid FROM pub) AND c.relkind IN ('r', 'p')
ORDER BY 1, 2`
