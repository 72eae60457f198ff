/* The package index the user's pip is set to use, for `fetch --wheels`: pip's own order of
 * environment and configuration files, read as far as `index-url` goes.
 * Scope: private to src/lib/fetch. */
#ifndef MD_PIP_CONFIG_H
#define MD_PIP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* The first `index-url` of: $PIP_INDEX_URL; the file $PIP_CONFIG_FILE; $VIRTUAL_ENV/pip.conf;
 * $XDG_CONFIG_HOME/pip/pip.conf (~/.config/pip/pip.conf); ~/.pip/pip.conf; /etc/xdg/pip/pip.conf;
 * /etc/pip.conf. In a file, [download] wins over [global]. The URL into URL, where it came from
 * ("PIP_INDEX_URL" or the file's path) into SOURCE; false when none sets it. */
bool md_pip_index_url(char *url, size_t usize, char *source, size_t ssize);

#endif
