package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/migrations"
	"github.com/queenforgo/queen/sql/pgtest"
)

// The SQL API's privileges (migrations 0011 and 0017): EXECUTE on the four
// entry points for queen_sql_api and its members, for nobody else, and nothing
// on the tables for anyone through them.

// loginAs creates a login role for the test (roles belong to the whole
// cluster: a random name, dropped at the end) and connects to dbURL as it.
func loginAs(t *testing.T, admin *pgx.Conn, dbURL string, memberOf string) *pgx.Conn {
	t.Helper()
	ctx := t.Context()
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	name := "sqlapi_test_" + hex.EncodeToString(buf[:])
	password := hex.EncodeToString(buf[:]) + "-pw"
	stmt := "CREATE ROLE " + pgx.Identifier{name}.Sanitize() + " LOGIN PASSWORD '" + password + "'"
	if memberOf != "" {
		stmt += " IN ROLE " + pgx.Identifier{memberOf}.Sanitize()
	}
	_, err := admin.Exec(ctx, stmt)
	require.NoError(t, err)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(name, password)
	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close(context.Background())
		_, err := admin.Exec(context.Background(), "DROP ROLE "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
	})
	return conn
}

func TestSQLAPIGrants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.NewDB(t)
	admin, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	entry := []string{
		"queen.push_messages_v2(jsonb,boolean,boolean)",
		"queen.push_messages_v3(jsonb,boolean,boolean)",
		"queen.pop_specific_batch(jsonb)",
		"queen.ack_messages_v2(jsonb)",
	}
	for _, f := range entry {
		var ok bool
		require.NoError(t, admin.QueryRow(ctx, "SELECT has_function_privilege('queen_sql_api', $1, 'EXECUTE')", f).Scan(&ok))
		require.True(t, ok, f)
	}
	// No function of the SQL API runs with the default ACL (NULL means
	// EXECUTE for PUBLIC), and no ACL names PUBLIC (grantee 0).
	var public, defaults int
	require.NoError(t, admin.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE p.proacl IS NULL),
		       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
		FROM pg_proc p
		WHERE p.pronamespace = 'queen'::regnamespace
		  AND (p.proname LIKE 'sql\_api\_%' OR p.proname IN ('push_messages_v2', 'push_messages_v3', 'pop_specific_batch', 'ack_messages_v2'))`).
		Scan(&defaults, &public))
	require.Zero(t, defaults)
	require.Zero(t, public)

	member := loginAs(t, admin, dbURL, "queen_sql_api")
	res := sqlPush(t, member, map[string]any{"queue": "granted", "transactionId": "m1", "payload": 1})
	require.Equal(t, "queued", res[0].Status)
	out := sqlPop(t, member, map[string]any{"queue_name": "granted", "worker_id": "member"})
	require.Len(t, out[0].Result.Messages, 1)
	acked := sqlAck(t, member, ackOf("m1", out[0].Result.PartitionID, "member", "completed"))
	require.True(t, acked[0].Success)
	var n int
	err = member.QueryRow(ctx, "SELECT count(*) FROM queen.messages").Scan(&n)
	require.Equal(t, "42501", sqlState(err), "the role reads no table: %v", err)
	var raw []byte
	err = member.QueryRow(ctx, "SELECT queen.sql_api_push('[]'::jsonb)").Scan(&raw)
	require.Equal(t, "42501", sqlState(err), "the helpers are the owner's: %v", err)

	outsider := loginAs(t, admin, dbURL, "")
	_, err = sqlPushErr(outsider, map[string]any{"queue": "granted", "transactionId": "o1"})
	require.Equal(t, "42501", sqlState(err), "%v", err)
	err = outsider.QueryRow(ctx, "SELECT queen.pop_specific_batch('[]'::jsonb)").Scan(&raw)
	require.Equal(t, "42501", sqlState(err), "%v", err)
	_, err = sqlAckErr(outsider, ackOf("m1", out[0].Result.PartitionID, "", "completed"))
	require.Equal(t, "42501", sqlState(err), "%v", err)
	err = member.QueryRow(ctx, "SELECT queen.sql_api_ack_write(NULL, NULL, 0, NULL, 0, 0, 0, 0, false, now())").Scan(&raw)
	require.Equal(t, "42501", sqlState(err), "the ack's helper is the owner's: %v", err)

	// Opened to PUBLIC (as a restore without privileges leaves it), the API
	// refuses everyone, its owner included, until the grant is gone.
	_, err = admin.Exec(ctx, "GRANT EXECUTE ON FUNCTION queen.pop_specific_batch(jsonb) TO PUBLIC")
	require.NoError(t, err)
	_, err = sqlPushErr(outsider, map[string]any{"queue": "granted", "transactionId": "o2"})
	require.Equal(t, "42501", sqlState(err), "%v", err)
	_, err = sqlPushErr(admin, map[string]any{"queue": "granted", "transactionId": "o3"})
	require.Equal(t, "42501", sqlState(err), "%v", err)
	require.Contains(t, err.Error(), "executable by PUBLIC")
	_, err = admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION queen.pop_specific_batch(jsonb) FROM PUBLIC")
	require.NoError(t, err)
	sqlPush(t, admin, map[string]any{"queue": "granted", "transactionId": "o4"})

	// The ack counts as an entry point of the guard: opened to PUBLIC, it
	// closes the whole API.
	_, err = admin.Exec(ctx, "GRANT EXECUTE ON FUNCTION queen.ack_messages_v2(jsonb) TO PUBLIC")
	require.NoError(t, err)
	_, err = sqlPushErr(admin, map[string]any{"queue": "granted", "transactionId": "o5"})
	require.Equal(t, "42501", sqlState(err), "%v", err)
	_, err = sqlAckErr(outsider, ackOf("o4", out[0].Result.PartitionID, "", "completed"))
	require.Equal(t, "42501", sqlState(err), "%v", err)
	_, err = admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION queen.ack_messages_v2(jsonb) FROM PUBLIC")
	require.NoError(t, err)
	require.True(t, sqlAck(t, member, ackOf("o4", out[0].Result.PartitionID, "", "completed"))[0].Success)
}

// Migrations 0011 and 0017 applied again over themselves change nothing
// and fail on nothing (functions replaced, role and table kept), so an
// operator may run them by hand, in that order, to restore the grants.
func TestSQLAPIMigrationReruns(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	for _, file := range []string{"0011_sql_api.up.sql", "0017_sql_api_ack.up.sql"} {
		body, err := fs.ReadFile(migrations.FS, file)
		require.NoError(t, err)
		_, err = pool.Exec(t.Context(), string(body))
		require.NoError(t, err, file)
	}
	res := sqlPush(t, pool, map[string]any{"queue": "rerun", "transactionId": "r1"})
	require.Equal(t, "queued", res[0].Status)
	acked := sqlAck(t, pool, ackOf("r1", res[0].PartitionID, "", "completed"))
	require.True(t, acked[0].Success)
	var guarded bool
	require.NoError(t, pool.QueryRow(t.Context(),
		"SELECT strpos(prosrc, 'ack_messages_v2') > 0 FROM pg_proc WHERE oid = 'queen.sql_api_guard'::regproc").Scan(&guarded))
	require.True(t, guarded, "the guard covers the ack")
	var triggers int
	require.NoError(t, pool.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_trigger WHERE tgrelid = 'queen.sql_api_pushed'::regclass").Scan(&triggers))
	require.Equal(t, 1, triggers)
}
