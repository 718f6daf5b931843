import Mustache

/// The Services Directory's Mustache templates, compiled into the server (no template files to
/// install beside it). `{{name}}` escapes HTML (`< > & " '`); no template uses the unescaped
/// `{{{…}}}` form, so field names and values, which are user data, are always shown as text.
/// Every link is relative (`{{root}}` leads back to `/arcgis/rest/`), so pages work under any
/// prefix a proxy adds.
enum DirectoryTemplates {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in templates {
            // The templates are constants of this file: a parse error is a programming error
            // that every directory test would show at once.
            try! library.register(text, named: name)
        }
        return library
    }()

    static let templates: [(String, String)] = [
        ("layout", layout), ("catalog", catalog), ("featureServer", featureServer), ("layer", layer), ("query", query),
        ("operation", operation), ("mapServer", mapServer), ("resource", resource), ("error", error),
    ]

    static let layout = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} - Outpost Services Directory</title>
        <link rel="icon" href="{{root}}static/favicon.svg" type="image/svg+xml">
        <link rel="stylesheet" href="{{root}}static/directory.css">
        {{#script}}<script src="{{root}}static/directory.js" defer></script>{{/script}}
        </head>
        <body>
        <header>
        <a class="home" href="{{root}}services?f=html">Outpost Services Directory</a>
        <nav class="crumbs">{{#crumbs}}<a href="{{href}}">{{name}}</a> / {{/crumbs}}<span>{{title}}</span></nav>
        </header>
        <main>
        <h1>{{title}}</h1>
        {{$content}}{{/content}}
        {{#hasFormats}}<p class="formats">Formats: {{#formats}}<a href="{{href}}">{{name}}</a> {{/formats}}</p>{{/hasFormats}}
        </main>
        </body>
        </html>

        """

    static let catalog = """
        {{<layout}}{{$content}}
        <table class="list">
        <thead><tr><th>Service</th><th>Type</th></tr></thead>
        <tbody>
        {{#services}}<tr><td><a href="{{href}}">{{name}}</a>{{#unavailable}} <span class="note">unavailable: its file could not be opened</span>{{/unavailable}}</td><td>{{type}}</td></tr>
        {{/services}}
        </tbody>
        </table>
        {{^services}}<p>No services.</p>{{/services}}
        <p>Maps to take offline: <a href="{{root}}maps?f=html">maps</a></p>
        {{/content}}{{/layout}}
        """

    static let properties = """
        <table class="properties">
        {{#properties}}<tr><th>{{name}}</th><td>{{#href}}<a href="{{href}}">{{value}}</a>{{/href}}{{^href}}{{value}}{{/href}}</td></tr>
        {{/properties}}
        </table>
        """

    static let featureServer = """
        {{<layout}}{{$content}}
        \(properties)
        <h2>Layers</h2>
        <ul class="links">{{#layers}}<li><a href="{{href}}">{{name}}</a> ({{id}}) <span class="note">{{kind}}</span></li>
        {{/layers}}</ul>
        {{^layers}}<p>None.</p>{{/layers}}
        {{#hasTables}}<h2>Tables</h2>
        <ul class="links">{{#tables}}<li><a href="{{href}}">{{name}}</a> ({{id}})</li>
        {{/tables}}</ul>{{/hasTables}}
        <h2>Operations</h2>
        <ul class="links">{{#operations}}<li><a href="{{href}}">{{name}}</a></li>
        {{/operations}}</ul>
        {{/content}}{{/layout}}
        """

    static let layer = """
        {{<layout}}{{$content}}
        \(properties)
        <h2>Fields</h2>
        <table class="list">
        <thead><tr><th>Name</th><th>Type</th><th>Alias</th><th>Length</th><th>Nullable</th><th>Editable</th><th>Default</th><th>Domain</th></tr></thead>
        <tbody>
        {{#fields}}<tr><td>{{name}}</td><td>{{type}}</td><td>{{alias}}</td><td>{{length}}</td><td>{{nullable}}</td><td>{{editable}}</td><td>{{defaultValue}}</td><td>{{domain}}</td></tr>
        {{/fields}}
        </tbody>
        </table>
        {{#hasDomains}}<h2>Domains</h2>
        {{#domains}}<h3>{{name}} <span class="note">{{type}}</span></h3>
        {{#range}}<p>Range: {{range}}</p>{{/range}}
        {{#hasCodes}}<table class="list"><thead><tr><th>Code</th><th>Name</th></tr></thead><tbody>
        {{#codes}}<tr><td>{{code}}</td><td>{{name}}</td></tr>
        {{/codes}}</tbody></table>{{/hasCodes}}
        {{/domains}}{{/hasDomains}}
        <h2>Relationships</h2>
        {{#relationships}}<p>{{.}}</p>{{/relationships}}{{^relationships}}<p>None.</p>{{/relationships}}
        <h2>Operations</h2>
        <ul class="links">{{#operations}}<li><a href="{{href}}">{{name}}</a></li>
        {{/operations}}</ul>
        {{/content}}{{/layout}}
        """

    /// A form of named fields (text inputs, text areas, selects) that submits to the page itself.
    static let form = """
        <form class="operation" method="{{method}}" action="{{action}}">
        {{#fields}}<div class="field"><label for="{{name}}">{{label}}</label>
        {{#area}}<textarea id="{{name}}" name="{{name}}" rows="6">{{value}}</textarea>{{/area}}
        {{#select}}<select id="{{name}}" name="{{name}}">{{#choices}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/choices}}</select>{{/select}}
        {{#line}}<input id="{{name}}" name="{{name}}" value="{{value}}">{{/line}}
        {{#password}}<input id="{{name}}" name="{{name}}" type="password" autocomplete="current-password">{{/password}}
        {{#help}}<span class="note">{{help}}</span>{{/help}}</div>
        {{/fields}}
        <input type="hidden" name="f" value="html">
        <button type="submit">{{submit}}</button>
        </form>
        """

    static let query = """
        {{<layout}}{{$content}}
        \(form)
        {{#ran}}<h2>Result</h2>
        {{#count}}<p class="count">{{count}}</p>{{/count}}
        {{#hasRows}}<table class="list features">
        <thead><tr>{{#columns}}<th>{{.}}</th>{{/columns}}</tr></thead>
        <tbody>
        {{#rows}}<tr>{{#cells}}<td>{{.}}</td>{{/cells}}</tr>
        {{/rows}}
        </tbody>
        </table>{{/hasRows}}
        <h3>JSON</h3>
        <pre class="json">{{json}}</pre>
        {{/ran}}
        {{/content}}{{/layout}}
        """

    static let operation = """
        {{<layout}}{{$content}}
        {{#description}}<p>{{description}}</p>{{/description}}
        {{#form}}\(form){{/form}}
        {{#result}}<h2>Result</h2>
        <pre class="json">{{result}}</pre>{{/result}}
        {{/content}}{{/layout}}
        """

    static let mapServer = """
        {{<layout}}{{$content}}
        \(properties)
        <h2>Preview</h2>
        <div id="map" class="map" data-tiles="{{tiles}}" data-min-level="{{minLevel}}" data-max-level="{{maxLevel}}"
          data-extent="{{extent}}" data-origin="{{origin}}" data-resolution0="{{resolution0}}" data-tile-size="{{tileSize}}" data-vector="{{vector}}"></div>
        <p class="note">Drag to pan, the buttons or the mouse wheel to zoom.</p>
        <h2>Levels of detail</h2>
        <table class="list"><thead><tr><th>Level</th><th>Resolution</th><th>Scale</th></tr></thead><tbody>
        {{#lods}}<tr><td>{{level}}</td><td>{{resolution}}</td><td>{{scale}}</td></tr>
        {{/lods}}</tbody></table>
        {{/content}}{{/layout}}
        """

    static let resource = """
        {{<layout}}{{$content}}
        <pre class="json">{{json}}</pre>
        {{/content}}{{/layout}}
        """

    static let error = """
        {{<layout}}{{$content}}
        <p class="error">Error {{code}}: {{message}}</p>
        {{#hasDetails}}<ul>{{#details}}<li>{{.}}</li>{{/details}}</ul>{{/hasDetails}}
        {{/content}}{{/layout}}
        """
}
