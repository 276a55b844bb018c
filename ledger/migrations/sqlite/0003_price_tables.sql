-- bursar ledger, SQLite schema v3: instance price-table versions kept in the ledger.
--
-- A version is stored as the table's canonical YAML (the format of `pricing/tables/*.yaml`,
-- written back by `PriceTable::to_yaml`), with the columns `bursar prices list` shows beside
-- it. `origin` says how it got here: `imported` (`bursar prices import FILE`) or `aws`
-- (`bursar prices refresh --aws`). A version that may have priced a job must never change, or
-- past charges stop being reproducible: (name, version) is unique and the triggers refuse
-- updates and deletes. A new price is a new version with a later `effective`.
create table price_tables (
    id integer primary key,
    name text not null,
    version text not null,
    effective integer not null,
    currency text not null,
    origin text not null check (origin in ('imported', 'aws')),
    row_count integer not null check (row_count >= 0),
    content text not null,
    imported_at integer not null,
    imported_by text not null,
    unique (name, version)
) strict;
create trigger price_tables_no_update before update on price_tables
begin
    select raise(abort, 'price_tables is append-only');
end;
create trigger price_tables_no_delete before delete on price_tables
begin
    select raise(abort, 'price_tables is append-only');
end;
