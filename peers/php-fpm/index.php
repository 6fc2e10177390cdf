<?php
// The benchmark routes as the PHP posts wrote them, behind nginx and php-fpm (pm = static):
// one request at a time per worker process; /sleep blocks the worker (usleep), /db is a
// synchronous PDO SQLite query on archzoo's database (ARCHZOO_DB).
// Buffered, so the answer carries Content-Length (nginx would otherwise send it chunked).
ob_start();
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
header('Content-Type: text/plain');
switch ($path) {
    case '/':
    case '/plaintext':
        echo 'hello, world!';
        break;
    case '/sum':
        $total = 0;
        for ($i = 0; $i < 1000; $i++) {
            $total += mt_rand(100, 999);
        }
        echo "sum=$total";
        break;
    case '/sleep':
        $ms = filter_var($_GET['ms'] ?? null, FILTER_VALIDATE_INT, ['options' => ['min_range' => 0, 'max_range' => 10000]]);
        if ($ms === false) {
            http_response_code(400);
            echo "ms must be an integer in 0..=10000\n";
            break;
        }
        usleep($ms * 1000);
        echo "slept=$ms";
        break;
    case '/db':
        $queries = filter_var($_GET['queries'] ?? '10', FILTER_VALIDATE_INT, ['options' => ['min_range' => 1, 'max_range' => 500]]);
        if ($queries === false) {
            http_response_code(400);
            echo "queries must be an integer in 1..=500\n";
            break;
        }
        static $db = null;
        $db = $db ?? new PDO('sqlite:' . $_SERVER['ARCHZOO_DB'], null, null, [PDO::ATTR_PERSISTENT => true]);
        $stmt = $db->prepare('SELECT value FROM test WHERE id >= ? LIMIT 10');
        $total = 0.0;
        for ($i = 0; $i < $queries; $i++) {
            $stmt->execute([mt_rand(1, 1000000 - 10)]);
            foreach ($stmt->fetchAll(PDO::FETCH_COLUMN) as $v) {
                $total += $v;
            }
        }
        printf('%.6f', $total);
        break;
    default:
        http_response_code(404);
        echo "not found\n";
}
header('Content-Length: ' . ob_get_length());
ob_end_flush();
